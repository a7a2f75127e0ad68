-- Portable edition of the claim protocol (src/entry/claim.rs, src/steps/transition.rs, src/entry/finish.rs) in
-- PL/pgSQL: the same decisions, outcomes, SQLSTATEs and messages as the C functions.
--
-- A claim never blocks: a new key is inserted only under pg_try_advisory_xact_lock on a 64-bit
-- hash of (scope, key), and a takeover locks the row with FOR UPDATE SKIP LOCKED; whatever
-- another transaction holds is processing_active. (The native edition's key lock is in a lock
-- class of its own; SQL can only use the shared bigint class: docs/managed.md.)
-- Record times: created_at/claimed_at/updated_at/expires_at from now(), leases from
-- clock_timestamp(), as the native Clock { txn, call }.

-- The body of idem_claim (sql/claim.sql declares it).
BODY idem_claim LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
#variable_conflict use_column
DECLARE
    -- Aliases, not copies: nothing to evaluate per call.
    s ALIAS FOR $1;
    k ALIAS FOR $2;
    h ALIAS FOR $3;
    call_at pg_catalog.timestamptz;
    rec record;  -- not %ROWTYPE: compiling that would lock the table before the rights are checked
    result @extschema@.idem_claim_result;
    outcome @extschema@.idem_outcome;
    have pg_catalog.bool;
    gen pg_catalog.int2;
    locked pg_catalog.bool;
    deadline pg_catalog.timestamptz;
    nap pg_catalog.float8;
BEGIN
    -- One test for the common case (every argument valid, no wait): each check in the native
    -- order, and the wait, only when it fails. Each helper raises exactly when its part does.
    IF s IS NULL OR k IS NULL OR h IS NULL OR lease IS NULL OR retention IS NULL OR wait IS NOT NULL
       OR pg_catalog.octet_length(s) OPERATOR(pg_catalog.>) 255 OR pg_catalog.octet_length(k) OPERATOR(pg_catalog.>) 255
       OR pg_catalog.octet_length(h) OPERATOR(pg_catalog.>) 255
       OR pg_catalog.octet_length(claimed_by) OPERATOR(pg_catalog.>) 255
       OR pg_catalog.btrim(s, E' \t\n\f\r'::pg_catalog.text) OPERATOR(pg_catalog.=) ''::pg_catalog.text
       OR pg_catalog.btrim(k, E' \t\n\f\r'::pg_catalog.text) OPERATOR(pg_catalog.=) ''::pg_catalog.text
       OR pg_catalog.btrim(h, E' \t\n\f\r'::pg_catalog.text) OPERATOR(pg_catalog.=) ''::pg_catalog.text
       OR lease OPERATOR(pg_catalog.<=) '0'::pg_catalog.interval OR lease OPERATOR(pg_catalog.>) '100 years'::pg_catalog.interval
       OR retention OPERATOR(pg_catalog.<=) '0'::pg_catalog.interval
       OR retention OPERATOR(pg_catalog.>) '100 years'::pg_catalog.interval THEN
        PERFORM idempotency.portable_name('scope', 'P4000', s);
        PERFORM idempotency.portable_name('key', 'P4001', k);
        PERFORM idempotency.portable_name('request_hash', 'P4003', h);
        PERFORM idempotency.portable_interval('lease', lease, false);
        PERFORM idempotency.portable_interval('retention', retention, false);
        PERFORM idempotency.portable_optional('claimed_by', claimed_by, 255);
        IF wait OPERATOR(pg_catalog.<) '0'::pg_catalog.interval THEN
            RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'wait must not be negative',
                HINT = 'Pass NULL (the default) not to wait.';
        END IF;
        -- wait: probe in a subtransaction that is rolled back (it keeps nothing but its outcome),
        -- sleeping 1 ms doubling up to 50 ms, until the key is not in flight or the time is up.
        IF wait OPERATOR(pg_catalog.>) '0'::pg_catalog.interval THEN
            deadline := pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) wait;
            nap := 0.001;
            LOOP
                BEGIN
                    result := @extschema@.idem_claim(s, k, h, lease, retention, claimed_by, NULL::pg_catalog.interval);
                    RAISE EXCEPTION USING ERRCODE = 'P4099', MESSAGE = 'probe done';
                EXCEPTION WHEN SQLSTATE 'P4099' THEN
                    NULL;
                END;
                EXIT WHEN result.outcome OPERATOR(pg_catalog.<>) 'processing_active'::@extschema@.idem_outcome
                       OR pg_catalog.clock_timestamp() OPERATOR(pg_catalog.>=) deadline;
                PERFORM pg_catalog.pg_sleep(LEAST(nap, pg_catalog.date_part('epoch'::pg_catalog.text,
                    deadline OPERATOR(pg_catalog.-) pg_catalog.clock_timestamp())));
                nap := LEAST(nap OPERATOR(pg_catalog.*) 2::pg_catalog.float8, 0.05::pg_catalog.float8);
            END LOOP;
            result := NULL;
        END IF;
    END IF;

    IF NOT pg_catalog.has_table_privilege('idempotency.requests'::pg_catalog.regclass,
                                          'SELECT, INSERT, UPDATE, DELETE'::pg_catalog.text) THEN
        PERFORM idempotency.portable_access('requests');
    END IF;
    call_at := pg_catalog.clock_timestamp();
    SELECT * INTO rec FROM idempotency.requests AS r
     WHERE r.scope OPERATOR(pg_catalog.=) s AND r.key OPERATOR(pg_catalog.=) k;
    have := FOUND;
    -- Each pass answers or saw the record appear/vanish under it; three are plenty.
    FOR pass IN 1..3 LOOP
        IF NOT have THEN
            -- The policy answers before another transaction's hold on the key may: under
            -- row-level security, a key another tenant is inserting is refused like a free one,
            -- by this one statement, so that no field of the error (its CONTEXT included) tells
            -- the two apart (sql/claim.sql's probe, as the native edition asks it).
            IF pg_catalog.row_security_active('idempotency.requests'::pg_catalog.regclass) THEN
                PERFORM idempotency.claim_policy_probe(s, k, h, idem_claim.claimed_by);
            END IF;
            IF NOT pg_catalog.pg_try_advisory_xact_lock(pg_catalog.hashtextextended(pg_catalog.octet_length(s)::pg_catalog.text OPERATOR(pg_catalog.||) ':'::pg_catalog.text OPERATOR(pg_catalog.||) s OPERATOR(pg_catalog.||) k, 18756::pg_catalog.int8)) THEN
                result.outcome := 'processing_active';
                RETURN result;
            END IF;
            gen := idempotency.layout_claim_generation();
            IF gen OPERATOR(pg_catalog.<>) 0::pg_catalog.int2 THEN
                result := idempotency.portable_insert_generation(gen, s, k, h, idem_claim.claimed_by,
                    idem_claim.lease, idem_claim.retention, call_at);
                IF result.outcome IS NOT NULL THEN
                    RETURN result;
                END IF;
                SELECT * INTO rec FROM idempotency.requests AS r
                 WHERE r.scope OPERATOR(pg_catalog.=) s AND r.key OPERATOR(pg_catalog.=) k;
                have := FOUND;
                CONTINUE;
            END IF;
            INSERT INTO idempotency.requests AS r (scope, key, request_hash, status, attempt, claimed_by,
                claimed_at, locked_until, lease, retention, created_at, updated_at, expires_at)
            VALUES (s, k, h, 'processing', 1, idem_claim.claimed_by, pg_catalog.now(),
                call_at OPERATOR(pg_catalog.+) idem_claim.lease, idem_claim.lease, idem_claim.retention,
                pg_catalog.now(), pg_catalog.now(), pg_catalog.now() OPERATOR(pg_catalog.+) idem_claim.retention)
            ON CONFLICT (scope, key) DO NOTHING
            RETURNING 'new_claim'::@extschema@.idem_outcome, r.attempt, NULL::pg_catalog.jsonb, r.recovery_point,
                      r.failure_code, r.failure_message, r.locked_until, r.expires_at INTO result;
            IF FOUND THEN
                RETURN result;
            END IF;
            -- Inserted and committed by someone since our read: look again.
            SELECT * INTO rec FROM idempotency.requests AS r
             WHERE r.scope OPERATOR(pg_catalog.=) s AND r.key OPERATOR(pg_catalog.=) k;
            have := FOUND;
            CONTINUE;
        END IF;
        locked := false;
        LOOP
            -- judge (src/entry/claim.rs): an expired finished record is free; a hash must match.
            IF rec.status OPERATOR(pg_catalog.<>) 'processing'::@extschema@.idem_status
               AND rec.expires_at OPERATOR(pg_catalog.<) call_at THEN
                outcome := 'new_claim';
            ELSE
                IF rec.request_hash OPERATOR(pg_catalog.<>) h THEN
                    RAISE EXCEPTION USING ERRCODE = 'P4002',
                        MESSAGE = pg_catalog.format('idempotency key %s in scope %s was used for a different request',
                            idempotency.portable_quote(k), idempotency.portable_quote(s)),
                        DETAIL = pg_catalog.format('This request''s hash: %s. The stored request''s hash differs.', h),
                        HINT = 'Reuse an idempotency key only to retry the same request; use a new key for a new request.';
                END IF;
                IF rec.status OPERATOR(pg_catalog.=) 'succeeded'::@extschema@.idem_status THEN
                    result := ROW('replay_success', rec.attempt, rec.response, rec.recovery_point, rec.failure_code,
                                  rec.failure_message, rec.locked_until, rec.expires_at);
                    RETURN result;
                ELSIF rec.status OPERATOR(pg_catalog.=) 'failed_final'::@extschema@.idem_status THEN
                    result := ROW('final_failure', rec.attempt, NULL, rec.recovery_point, rec.failure_code,
                                  rec.failure_message, rec.locked_until, rec.expires_at);
                    RETURN result;
                ELSIF rec.status OPERATOR(pg_catalog.=) 'failed_retryable'::@extschema@.idem_status THEN
                    outcome := 'retryable_failure';
                ELSIF rec.locked_until OPERATOR(pg_catalog.<) call_at THEN
                    outcome := 'processing_stale';
                ELSE
                    result := ROW('processing_active', rec.attempt, NULL, rec.recovery_point, rec.failure_code,
                                  rec.failure_message, rec.locked_until, rec.expires_at);
                    RETURN result;
                END IF;
            END IF;
            EXIT WHEN locked;
            -- Lock it without waiting; the locked version is the newest: judge it again.
            SELECT * INTO rec FROM idempotency.requests AS r
             WHERE r.scope OPERATOR(pg_catalog.=) s AND r.key OPERATOR(pg_catalog.=) k
             FOR UPDATE SKIP LOCKED;
            locked := FOUND;
            CONTINUE WHEN locked;
            -- Locked by a transaction that is changing it, or just deleted.
            SELECT * INTO rec FROM idempotency.requests AS r
             WHERE r.scope OPERATOR(pg_catalog.=) s AND r.key OPERATOR(pg_catalog.=) k;
            have := FOUND;
            IF have THEN
                result := ROW('processing_active', rec.attempt, NULL, rec.recovery_point, rec.failure_code,
                              rec.failure_message, rec.locked_until, rec.expires_at);
                RETURN result;
            END IF;
            EXIT;
        END LOOP;
        CONTINUE WHEN NOT locked;
        IF outcome OPERATOR(pg_catalog.=) 'new_claim'::@extschema@.idem_outcome THEN
            -- Retention ended: start over as if the record had been purged.
            UPDATE idempotency.requests AS r
               SET request_hash = h, status = 'processing', attempt = 1, response = NULL,
                   recovery_point = NULL, failure_code = NULL, failure_message = NULL,
                   claimed_by = idem_claim.claimed_by, claimed_at = pg_catalog.now(),
                   locked_until = call_at OPERATOR(pg_catalog.+) idem_claim.lease, lease = idem_claim.lease,
                   retention = idem_claim.retention, created_at = pg_catalog.now(), updated_at = pg_catalog.now(),
                   expires_at = pg_catalog.now() OPERATOR(pg_catalog.+) idem_claim.retention
             WHERE r.scope OPERATOR(pg_catalog.=) s AND r.key OPERATOR(pg_catalog.=) k
            RETURNING r.* INTO rec;
        ELSE
            UPDATE idempotency.requests AS r
               SET status = 'processing', attempt = r.attempt OPERATOR(pg_catalog.+) 1,
                   claimed_by = idem_claim.claimed_by, claimed_at = pg_catalog.now(),
                   locked_until = call_at OPERATOR(pg_catalog.+) idem_claim.lease, lease = idem_claim.lease,
                   retention = idem_claim.retention, updated_at = pg_catalog.now(),
                   expires_at = pg_catalog.now() OPERATOR(pg_catalog.+) idem_claim.retention
             WHERE r.scope OPERATOR(pg_catalog.=) s AND r.key OPERATOR(pg_catalog.=) k
            RETURNING r.* INTO rec;
        END IF;
        result := ROW(outcome, rec.attempt, NULL, rec.recovery_point, rec.failure_code,
                      rec.failure_message, rec.locked_until, rec.expires_at);
        RETURN result;
    END LOOP;
    result := NULL;
    result.outcome := 'processing_active';
    RETURN result;
END
$fn$;
