-- Portable edition of finishing an attempt (src/entry/finish.rs, src/steps/change.rs): complete, fail,
-- checkpoint and forget. The current attempt is locked (FOR UPDATE, as the native SQL path
-- does) and changed; otherwise the record is read again to say why not (P4010-P4013, P4012).

-- Why a change of (scope, key) did not happen: P4012 for another attempt, else `code`.
-- Returns normally only when `is_repeat` (the same change was already made).
CREATE FUNCTION idempotency.portable_diagnose(
    scope pg_catalog.text, key pg_catalog.text, attempt pg_catalog.int4,
    code pg_catalog.text, what pg_catalog.text, is_repeat pg_catalog.bool
) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
#variable_conflict use_column
DECLARE
    rec record;  -- not %ROWTYPE: compiling that would lock the table before the rights are checked
    name_ constant pg_catalog.text := pg_catalog.format('scope %s, key %s',
        idempotency.portable_quote(portable_diagnose.scope), idempotency.portable_quote(portable_diagnose.key));
BEGIN
    -- Rights first, as every caller of idempotency.requests (portable_access): anyone with
    -- USAGE on the schema may call this, and the SELECT below locks the table to plan.
    PERFORM idempotency.portable_access('requests'::pg_catalog.text);
    SELECT * INTO rec FROM idempotency.requests AS r
     WHERE r.scope OPERATOR(pg_catalog.=) portable_diagnose.scope
       AND r.key OPERATOR(pg_catalog.=) portable_diagnose.key;
    IF FOUND AND portable_diagnose.attempt IS NOT NULL
       AND rec.attempt OPERATOR(pg_catalog.<>) portable_diagnose.attempt THEN
        RAISE EXCEPTION USING ERRCODE = 'P4012',
            MESSAGE = pg_catalog.format('attempt %s of %s is no longer the current attempt', portable_diagnose.attempt, name_),
            DETAIL = pg_catalog.format('The current attempt is %s: another claim took the key over.', rec.attempt),
            HINT = 'Stop this attempt; its lease ran out and its work is someone else''s now.';
    END IF;
    IF FOUND AND is_repeat THEN
        RETURN;
    END IF;
    RAISE EXCEPTION USING ERRCODE = code,
        MESSAGE = pg_catalog.format('cannot %s %s: it is not processing', what, name_),
        DETAIL = CASE WHEN FOUND THEN pg_catalog.format('The record is %s (attempt %s).', rec.status, rec.attempt)
                      ELSE 'There is no record of this key (never claimed, forgotten or purged).' END,
        HINT = 'Call idem_claim first; only a processing claim can be completed, failed or checkpointed.';
END
$fn$;

-- The body of idem_complete (sql/claim.sql declares it).
BODY idem_complete LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
#variable_conflict use_column
DECLARE
    s ALIAS FOR $1;
    k ALIAS FOR $2;
    rec record;  -- not %ROWTYPE: compiling that would lock the table before the rights are checked
BEGIN
    -- One test for the common case; the checks in the native order when it fails.
    IF s IS NULL OR k IS NULL OR pg_catalog.octet_length(s) OPERATOR(pg_catalog.>) 255
       OR pg_catalog.octet_length(k) OPERATOR(pg_catalog.>) 255
       OR pg_catalog.btrim(s, E' \t\n\f\r'::pg_catalog.text) OPERATOR(pg_catalog.=) ''::pg_catalog.text
       OR pg_catalog.btrim(k, E' \t\n\f\r'::pg_catalog.text) OPERATOR(pg_catalog.=) ''::pg_catalog.text THEN
        PERFORM idempotency.portable_name('scope', 'P4000', s);
        PERFORM idempotency.portable_name('key', 'P4001', k);
    END IF;
    IF NOT pg_catalog.has_table_privilege('idempotency.requests'::pg_catalog.regclass,
                                          'SELECT, INSERT, UPDATE, DELETE'::pg_catalog.text) THEN
        PERFORM idempotency.portable_access('requests');
    END IF;
    -- A rotation of the generations layout may move the record (a DELETE and an INSERT) while
    -- this waits for its row lock: then it finds no row, and tries again where it went.
    FOR pass IN 1..3 LOOP
        UPDATE idempotency.requests AS r
           SET status = 'succeeded', response = idem_complete.response, failure_code = NULL,
               failure_message = NULL, locked_until = NULL, updated_at = pg_catalog.now(),
               expires_at = GREATEST(r.expires_at, pg_catalog.now() OPERATOR(pg_catalog.+) r.retention)
         WHERE r.scope OPERATOR(pg_catalog.=) s AND r.key OPERATOR(pg_catalog.=) k
           AND r.status OPERATOR(pg_catalog.=) 'processing'::@extschema@.idem_status
           AND (idem_complete.attempt IS NULL OR r.attempt OPERATOR(pg_catalog.=) idem_complete.attempt);
        IF FOUND THEN
            RETURN;
        END IF;
        EXIT WHEN NOT idempotency.portable_moved(s, k, idem_complete.attempt);
    END LOOP;
    SELECT * INTO rec FROM idempotency.requests AS r
     WHERE r.scope OPERATOR(pg_catalog.=) s AND r.key OPERATOR(pg_catalog.=) k;
    PERFORM idempotency.portable_diagnose(s, k, idem_complete.attempt, 'P4010', 'complete',
        FOUND AND rec.status OPERATOR(pg_catalog.=) 'succeeded'::@extschema@.idem_status
        AND ((rec.response IS NULL AND idem_complete.response IS NULL)
             OR rec.response OPERATOR(pg_catalog.=) idem_complete.response) IS TRUE);
END
$fn$;

-- The body of idem_fail (sql/claim.sql declares it).
BODY idem_fail LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
#variable_conflict use_column
DECLARE
    s constant pg_catalog.text := idem_fail.scope;
    k constant pg_catalog.text := idem_fail.key;
    ws constant pg_catalog.text := E' \t\n\f\r';
    new_status @extschema@.idem_status;
    rec record;  -- not %ROWTYPE: compiling that would lock the table before the rights are checked
BEGIN
    IF s IS NULL OR pg_catalog.octet_length(s) OPERATOR(pg_catalog.>) 255
       OR pg_catalog.btrim(s, ws) OPERATOR(pg_catalog.=) '' THEN
        PERFORM idempotency.portable_name('scope', 'P4000', s);
    END IF;
    IF k IS NULL OR pg_catalog.octet_length(k) OPERATOR(pg_catalog.>) 255
       OR pg_catalog.btrim(k, ws) OPERATOR(pg_catalog.=) '' THEN
        PERFORM idempotency.portable_name('key', 'P4001', k);
    END IF;
    IF retryable IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'retryable must not be null';
    END IF;
    PERFORM idempotency.portable_optional('code', idem_fail.code, 255);
    PERFORM idempotency.portable_optional('message', idem_fail.message, 8192);
    IF NOT pg_catalog.has_table_privilege('idempotency.requests'::pg_catalog.regclass,
                                          'SELECT, INSERT, UPDATE, DELETE'::pg_catalog.text) THEN
        PERFORM idempotency.portable_access('requests');
    END IF;
    new_status := CASE WHEN retryable THEN 'failed_retryable' ELSE 'failed_final' END;
    FOR pass IN 1..3 LOOP
        UPDATE idempotency.requests AS r
           SET status = new_status, failure_code = idem_fail.code, failure_message = idem_fail.message,
               locked_until = NULL, updated_at = pg_catalog.now(),
               expires_at = GREATEST(r.expires_at, pg_catalog.now() OPERATOR(pg_catalog.+) r.retention)
         WHERE r.scope OPERATOR(pg_catalog.=) s AND r.key OPERATOR(pg_catalog.=) k
           AND r.status OPERATOR(pg_catalog.=) 'processing'::@extschema@.idem_status
           AND (idem_fail.attempt IS NULL OR r.attempt OPERATOR(pg_catalog.=) idem_fail.attempt);
        IF FOUND THEN
            RETURN;
        END IF;
        EXIT WHEN NOT idempotency.portable_moved(s, k, idem_fail.attempt);
    END LOOP;
    SELECT * INTO rec FROM idempotency.requests AS r
     WHERE r.scope OPERATOR(pg_catalog.=) s AND r.key OPERATOR(pg_catalog.=) k;
    PERFORM idempotency.portable_diagnose(s, k, idem_fail.attempt, 'P4011', 'fail',
        FOUND AND rec.status OPERATOR(pg_catalog.=) new_status
        AND rec.failure_code IS NOT DISTINCT FROM idem_fail.code
        AND rec.failure_message IS NOT DISTINCT FROM idem_fail.message);
END
$fn$;

-- The body of idem_checkpoint (sql/claim.sql declares it).
BODY idem_checkpoint LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
#variable_conflict use_column
DECLARE
    s constant pg_catalog.text := idem_checkpoint.scope;
    k constant pg_catalog.text := idem_checkpoint.key;
    ws constant pg_catalog.text := E' \t\n\f\r';
    until_ pg_catalog.timestamptz;
BEGIN
    -- The native edition checks lease first.
    IF idem_checkpoint.lease IS NOT NULL THEN
        PERFORM idempotency.portable_interval('lease', idem_checkpoint.lease, false);
    END IF;
    IF s IS NULL OR pg_catalog.octet_length(s) OPERATOR(pg_catalog.>) 255
       OR pg_catalog.btrim(s, ws) OPERATOR(pg_catalog.=) '' THEN
        PERFORM idempotency.portable_name('scope', 'P4000', s);
    END IF;
    IF k IS NULL OR pg_catalog.octet_length(k) OPERATOR(pg_catalog.>) 255
       OR pg_catalog.btrim(k, ws) OPERATOR(pg_catalog.=) '' THEN
        PERFORM idempotency.portable_name('key', 'P4001', k);
    END IF;
    PERFORM idempotency.portable_optional('recovery_point', idem_checkpoint.recovery_point, 8192);
    IF NOT pg_catalog.has_table_privilege('idempotency.requests'::pg_catalog.regclass,
                                          'SELECT, INSERT, UPDATE, DELETE'::pg_catalog.text) THEN
        PERFORM idempotency.portable_access('requests');
    END IF;
    FOR pass IN 1..3 LOOP
        UPDATE idempotency.requests AS r
           SET recovery_point = COALESCE(idem_checkpoint.recovery_point, r.recovery_point),
               lease = COALESCE(idem_checkpoint.lease, r.lease),
               locked_until = pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) COALESCE(idem_checkpoint.lease, r.lease),
               updated_at = pg_catalog.now()
         WHERE r.scope OPERATOR(pg_catalog.=) s AND r.key OPERATOR(pg_catalog.=) k
           AND r.status OPERATOR(pg_catalog.=) 'processing'::@extschema@.idem_status
           AND (idem_checkpoint.attempt IS NULL OR r.attempt OPERATOR(pg_catalog.=) idem_checkpoint.attempt)
        RETURNING r.locked_until INTO until_;
        IF FOUND THEN
            RETURN until_;
        END IF;
        EXIT WHEN NOT idempotency.portable_moved(s, k, idem_checkpoint.attempt);
    END LOOP;
    PERFORM idempotency.portable_diagnose(s, k, idem_checkpoint.attempt, 'P4013', 'checkpoint', false);
    RAISE EXCEPTION USING ERRCODE = 'XX000', MESSAGE = 'checkpoint changed nothing';
END
$fn$;

-- The body of idem_forget (sql/claim.sql declares it).
BODY idem_forget LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
#variable_conflict use_column
BEGIN
    PERFORM idempotency.portable_name('scope', 'P4000', idem_forget.scope);
    PERFORM idempotency.portable_name('key', 'P4001', idem_forget.key);
    IF NOT pg_catalog.has_table_privilege('idempotency.requests'::pg_catalog.regclass,
                                          'SELECT, INSERT, UPDATE, DELETE'::pg_catalog.text) THEN
        PERFORM idempotency.portable_access('requests');
    END IF;
    -- A rotation may move the record while this waits for its lock: then try where it went.
    FOR pass IN 1..3 LOOP
        DELETE FROM idempotency.requests AS r
         WHERE r.scope OPERATOR(pg_catalog.=) idem_forget.scope AND r.key OPERATOR(pg_catalog.=) idem_forget.key;
        IF FOUND THEN
            RETURN true;
        END IF;
        EXIT WHEN NOT EXISTS (SELECT FROM idempotency.requests AS r
                               WHERE r.scope OPERATOR(pg_catalog.=) idem_forget.scope
                                 AND r.key OPERATOR(pg_catalog.=) idem_forget.key);
    END LOOP;
    RETURN false;
END
$fn$;

-- Whether the record of (s, k) is, as a new statement sees it, the processing attempt
-- `attempt` (any, if NULL): after a change found no row, the record was moved by a rotation
-- of the generations layout while the change waited for its lock.
CREATE FUNCTION idempotency.portable_moved(s pg_catalog.text, k pg_catalog.text, attempt pg_catalog.int4)
RETURNS pg_catalog.bool
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    -- Rights first (portable_access): PL/pgSQL plans, and so locks, the table only below.
    PERFORM idempotency.portable_access('requests'::pg_catalog.text);
    RETURN EXISTS (SELECT FROM idempotency.requests AS r
                    WHERE r.scope OPERATOR(pg_catalog.=) portable_moved.s AND r.key OPERATOR(pg_catalog.=) portable_moved.k
                      AND r.status OPERATOR(pg_catalog.=) 'processing'::@extschema@.idem_status
                      AND (portable_moved.attempt IS NULL OR r.attempt OPERATOR(pg_catalog.=) portable_moved.attempt));
END
$fn$;
