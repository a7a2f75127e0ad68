-- Portable edition of idem_call and its error classification (src/entry/call.rs,
-- src/entry/call_target.rs): claim, run fn(request) once in a subtransaction (a PL/pgSQL exception
-- block), record its result or its non-transient failure, re-raise a transient one.

-- The body of idem_retryable (sql/call.sql declares it).
BODY idem_retryable LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    IF pg_catalog.octet_length(sqlstate) OPERATOR(pg_catalog.<>) 5
       OR sqlstate OPERATOR(pg_catalog.!~) '^[0-9A-Z]{5}$'::pg_catalog.text THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            -- Quoted here, not by idempotency.portable_quote: like the native function, this
            -- one needs no USAGE on schema idempotency.
            MESSAGE = pg_catalog.format('"%s" is not a SQLSTATE', pg_catalog.replace(pg_catalog.replace(sqlstate,
                E'\\'::pg_catalog.text, E'\\\\'::pg_catalog.text), '"'::pg_catalog.text, E'\\"'::pg_catalog.text)),
            HINT = 'A SQLSTATE is five digits or upper-case letters, such as 40001.';
    END IF;
    RETURN sqlstate OPERATOR(pg_catalog.=) ANY ('{40001,40P01,55P03,57014}'::pg_catalog.text[])
        OR pg_catalog.left(sqlstate, 2) OPERATOR(pg_catalog.=) ANY ('{08,53}'::pg_catalog.text[]);
END
$fn$;

-- `value` cut to at most `max_bytes` without splitting a character (pg_mbcliplen).
CREATE FUNCTION idempotency.portable_clip(value pg_catalog.text, max_bytes pg_catalog.int4)
RETURNS pg_catalog.text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    WHILE pg_catalog.octet_length(value) OPERATOR(pg_catalog.>) max_bytes LOOP
        -- Each character is at most 4 bytes: never cuts below the limit.
        value := pg_catalog.left(value, pg_catalog.length(value) OPERATOR(pg_catalog.-) GREATEST(1,
            (pg_catalog.octet_length(value) OPERATOR(pg_catalog.-) max_bytes) OPERATOR(pg_catalog./) 4));
    END LOOP;
    RETURN value;
END
$fn$;

-- Is there another function named as `fn` in its schema (which a call by name could reach)?
CREATE FUNCTION idempotency.portable_call_overloaded(fn pg_catalog.regprocedure, nsp pg_catalog.oid, name_ pg_catalog.name)
RETURNS pg_catalog.bool
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN EXISTS (SELECT FROM pg_catalog.pg_proc AS o
                    WHERE o.pronamespace OPERATOR(pg_catalog.=) nsp AND o.proname OPERATOR(pg_catalog.=) name_
                      AND o.oid OPERATOR(pg_catalog.<>) fn::pg_catalog.oid);
END
$fn$;

-- idem_call itself is a SQL wrapper without SET search_path, the one function of the edition
-- without it: it hands the caller's search_path to the work, which runs the callee under it,
-- as the native edition does (a callee may name its own tables unqualified). The wrapper's
-- body names nothing unqualified, so the caller's path cannot redirect it.
CREATE FUNCTION idempotency.portable_call(
    scope pg_catalog.text,
    key pg_catalog.text,
    request pg_catalog.jsonb,
    fn pg_catalog.regprocedure,
    lease pg_catalog.interval,
    retention pg_catalog.interval,
    caller_path pg_catalog.text
) RETURNS @extschema@.idem_call_result
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
#variable_conflict use_column
DECLARE
    s constant pg_catalog.text := idempotency.portable_name('scope', 'P4000', portable_call.scope);
    k constant pg_catalog.text := idempotency.portable_name('key', 'P4001', portable_call.key);
    proc record;
    fname pg_catalog.text;
    claimed @extschema@.idem_claim_result;
    result @extschema@.idem_call_result;
    answer pg_catalog.jsonb;
    code pg_catalog.text;
    msg pg_catalog.text;
BEGIN
    IF portable_call.request IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'P4003', MESSAGE = 'request must not be null';
    END IF;
    IF portable_call.fn IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'fn must not be null';
    END IF;
    PERFORM idempotency.portable_interval('lease', portable_call.lease, false);
    PERFORM idempotency.portable_interval('retention', portable_call.retention, false);

    -- src/entry/call_target.rs: a plain function (jsonb) -> jsonb the caller may execute.
    SELECT p.prokind, p.proretset, p.pronargs, p.proargtypes, p.prorettype, p.pronamespace,
           n.nspname, p.proname
      INTO proc
      FROM pg_catalog.pg_proc AS p JOIN pg_catalog.pg_namespace AS n
        ON n.oid OPERATOR(pg_catalog.=) p.pronamespace
     WHERE p.oid OPERATOR(pg_catalog.=) portable_call.fn::pg_catalog.oid;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '42883',
            MESSAGE = pg_catalog.format('function with OID %s does not exist', portable_call.fn::pg_catalog.oid),
            HINT = 'idem_call needs a function taking (jsonb) and returning jsonb.';
    END IF;
    -- Named as the caller's path shows it, as in the native messages.
    PERFORM pg_catalog.set_config('search_path', caller_path, true);
    fname := portable_call.fn::pg_catalog.text;
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    IF proc.prokind OPERATOR(pg_catalog.<>) 'f' THEN
        RAISE EXCEPTION USING ERRCODE = '42883', MESSAGE = pg_catalog.format('%s is not a plain function', fname),
            HINT = 'idem_call needs a function taking (jsonb) and returning jsonb.';
    END IF;
    IF proc.pronargs OPERATOR(pg_catalog.<>) 1
       OR proc.proargtypes[0] OPERATOR(pg_catalog.<>) 'pg_catalog.jsonb'::pg_catalog.regtype
       OR proc.prorettype OPERATOR(pg_catalog.<>) 'pg_catalog.jsonb'::pg_catalog.regtype OR proc.proretset THEN
        RAISE EXCEPTION USING ERRCODE = '42883',
            MESSAGE = pg_catalog.format('function %s returning %s%s cannot be called by idem_call', fname,
                CASE WHEN proc.proretset THEN 'setof ' ELSE '' END, pg_catalog.format_type(proc.prorettype, NULL)),
            HINT = 'idem_call needs a function taking (jsonb) and returning jsonb.';
    END IF;
    IF NOT pg_catalog.has_function_privilege(portable_call.fn::pg_catalog.oid, 'EXECUTE') THEN
        RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = pg_catalog.format('permission denied for function %s', fname);
    END IF;
    IF NOT pg_catalog.has_schema_privilege(proc.pronamespace, 'USAGE') THEN
        RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = pg_catalog.format('permission denied for schema %s', proc.nspname),
            DETAIL = pg_catalog.format('idem_call was asked to call %s.', fname),
            HINT = 'Calling a function needs USAGE on its schema, even when given by OID.';
    END IF;

    -- SQL cannot call a function by its OID: the call below names it, and another function of
    -- that name in its schema could make the call ambiguous (42725), which would record the
    -- key as failed for good. Refused before anything is recorded (docs/managed.md).
    IF idempotency.portable_call_overloaded(portable_call.fn, proc.pronamespace, proc.proname) THEN
        RAISE EXCEPTION USING ERRCODE = '42725',
            MESSAGE = pg_catalog.format('idem_call cannot call %s: another function of that name is in its schema', fname),
            DETAIL = 'The portable edition calls a function by its name, which that other function could make ambiguous.',
            HINT = 'Give the function a name of its own in its schema, or move up to the native edition, which calls it by its OID.';
    END IF;
    claimed := @extschema@.idem_claim(s, k, @extschema@.idem_hash(portable_call.request), portable_call.lease, portable_call.retention);
    IF claimed.outcome OPERATOR(pg_catalog.=) ANY ('{replay_success,final_failure}'::@extschema@.idem_outcome[]) THEN
        result := ROW(claimed.outcome, claimed.response, claimed.failure_code, claimed.failure_message, claimed.attempt);
        RETURN result;
    END IF;
    IF claimed.outcome OPERATOR(pg_catalog.=) 'processing_active'::@extschema@.idem_outcome THEN
        RAISE EXCEPTION USING ERRCODE = 'P4029',
            MESSAGE = pg_catalog.format('idempotency key %s in scope %s is being processed by another call',
                idempotency.portable_quote(k), idempotency.portable_quote(s)),
            DETAIL = 'Its claim has a live lease, or was made by a transaction that has not committed yet.',
            HINT = 'Retry after a short delay.';
    END IF;

    BEGIN
        PERFORM pg_catalog.set_config('search_path', caller_path, true);
        EXECUTE pg_catalog.format('SELECT %I.%I($1)', proc.nspname, proc.proname) INTO answer USING portable_call.request;
        PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    EXCEPTION WHEN assert_failure OR others THEN
        GET STACKED DIAGNOSTICS code = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
        IF @extschema@.idem_retryable(code) THEN
            RAISE;
        END IF;
        -- An overload added since the check above: nothing is recorded, as before the claim.
        IF code OPERATOR(pg_catalog.=) '42725'::pg_catalog.text
           AND idempotency.portable_call_overloaded(portable_call.fn, proc.pronamespace, proc.proname) THEN
            RAISE;
        END IF;
        msg := idempotency.portable_clip(msg, 8192);
        UPDATE idempotency.requests AS r
           SET status = 'failed_final', failure_code = code, failure_message = msg,
               locked_until = NULL, updated_at = pg_catalog.now(),
               expires_at = GREATEST(r.expires_at, pg_catalog.now() OPERATOR(pg_catalog.+) r.retention)
         WHERE r.scope OPERATOR(pg_catalog.=) s AND r.key OPERATOR(pg_catalog.=) k
           AND r.status OPERATOR(pg_catalog.=) 'processing'::@extschema@.idem_status
           AND r.attempt OPERATOR(pg_catalog.=) claimed.attempt;
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'P4011',
                MESSAGE = pg_catalog.format('idem_call could not fail scope %s, key %s: the record is no longer processing',
                    idempotency.portable_quote(s), idempotency.portable_quote(k)),
                HINT = 'The called function must not complete, fail or forget its own idempotency key.';
        END IF;
        result := ROW('final_failure', NULL, code, msg, claimed.attempt);
        RETURN result;
    END;
    UPDATE idempotency.requests AS r
       SET status = 'succeeded', response = answer, failure_code = NULL, failure_message = NULL,
           locked_until = NULL, updated_at = pg_catalog.now(),
           expires_at = GREATEST(r.expires_at, pg_catalog.now() OPERATOR(pg_catalog.+) r.retention)
     WHERE r.scope OPERATOR(pg_catalog.=) s AND r.key OPERATOR(pg_catalog.=) k
       AND r.status OPERATOR(pg_catalog.=) 'processing'::@extschema@.idem_status
       AND r.attempt OPERATOR(pg_catalog.=) claimed.attempt;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'P4010',
            MESSAGE = pg_catalog.format('idem_call could not complete scope %s, key %s: the record is no longer processing',
                idempotency.portable_quote(s), idempotency.portable_quote(k)),
            HINT = 'The called function must not complete, fail or forget its own idempotency key.';
    END IF;
    result := ROW(claimed.outcome, answer, NULL, NULL, claimed.attempt);
    RETURN result;
END
$fn$;
-- The body of idem_call (sql/call.sql declares it).
BODY idem_call LANGUAGE sql AS $fn$
SELECT idempotency.portable_call($1, $2, $3, $4, $5, $6, pg_catalog.current_setting('search_path'::pg_catalog.text))
$fn$;
