-- The claim protocol's functions. They are C functions written against fcinfo (src/entry/claim.rs)
-- so they can take jsonb and intervals as raw datums and return one composite row.
-- Their SQL is fully schema-qualified, so the caller's search_path cannot redirect it.

-- A named row type rather than OUT parameters: the executor takes a named type's descriptor
-- from its type cache, while OUT parameters are decoded from pg_proc on every execution.
CREATE TYPE @extschema@.idem_claim_result AS (
    outcome         @extschema@.idem_outcome,
    attempt         pg_catalog.int4,
    response        pg_catalog.jsonb,
    recovery_point  pg_catalog.text,
    failure_code    pg_catalog.text,
    failure_message pg_catalog.text,
    locked_until    pg_catalog.timestamptz,
    expires_at      pg_catalog.timestamptz
);
COMMENT ON TYPE @extschema@.idem_claim_result IS 'What idem_claim returns';

CREATE FUNCTION @extschema@.idem_claim(
    scope pg_catalog.text,
    key pg_catalog.text,
    request_hash pg_catalog.text,
    lease pg_catalog.interval DEFAULT '5 minutes',
    retention pg_catalog.interval DEFAULT '24 hours',
    claimed_by pg_catalog.text DEFAULT NULL,
    wait pg_catalog.interval DEFAULT NULL
) RETURNS @extschema@.idem_claim_result
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'idem_claim';
COMMENT ON FUNCTION @extschema@.idem_claim IS
    'Claim (scope, key) for one request: new_claim, replay_success, processing_active, processing_stale, retryable_failure or final_failure; with wait, a key in flight is waited for at most that long';

CREATE FUNCTION @extschema@.idem_complete(
    scope pg_catalog.text,
    key pg_catalog.text,
    response pg_catalog.jsonb,
    attempt pg_catalog.int4 DEFAULT NULL
) RETURNS void
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'idem_complete';
COMMENT ON FUNCTION @extschema@.idem_complete IS 'processing -> succeeded, storing the response to replay';

CREATE FUNCTION @extschema@.idem_fail(
    scope pg_catalog.text,
    key pg_catalog.text,
    retryable pg_catalog.bool,
    code pg_catalog.text DEFAULT NULL,
    message pg_catalog.text DEFAULT NULL,
    attempt pg_catalog.int4 DEFAULT NULL
) RETURNS void
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'idem_fail';
COMMENT ON FUNCTION @extschema@.idem_fail IS 'processing -> failed_retryable or failed_final';

CREATE FUNCTION @extschema@.idem_checkpoint(
    scope pg_catalog.text,
    key pg_catalog.text,
    recovery_point pg_catalog.text,
    attempt pg_catalog.int4 DEFAULT NULL,
    lease pg_catalog.interval DEFAULT NULL
) RETURNS pg_catalog.timestamptz
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'idem_checkpoint';
COMMENT ON FUNCTION @extschema@.idem_checkpoint IS 'Record the phase reached and renew the lease; returns the new locked_until';

CREATE FUNCTION @extschema@.idem_forget(
    scope pg_catalog.text,
    key pg_catalog.text
) RETURNS pg_catalog.bool
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'idem_forget';
COMMENT ON FUNCTION @extschema@.idem_forget IS 'Delete the record of (scope, key) in any state; true if it existed';

-- Under row-level security a claim asks the policies about a new row of its key before another
-- transaction's hold on that key may answer (docs/tenants.md; record_sql.rs). attempt 0 breaks
-- requests_attempt_check, which the executor checks after the policies' WITH CHECK and before
-- any index: so the probe never waits for a key and never writes. A refusal is Postgres' own
-- 42501, raised as the real INSERT would raise it.
CREATE FUNCTION idempotency.claim_policy_probe(
    scope pg_catalog.text,
    key pg_catalog.text,
    request_hash pg_catalog.text,
    claimed_by pg_catalog.text
) RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF scope IS NULL OR key IS NULL OR request_hash IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004',
            MESSAGE = 'claim_policy_probe: scope, key and request_hash must not be null';
    END IF;
    INSERT INTO idempotency.requests (scope, key, request_hash, status, attempt, claimed_by,
        claimed_at, locked_until, lease, retention, created_at, updated_at, expires_at)
    VALUES (claim_policy_probe.scope, claim_policy_probe.key, claim_policy_probe.request_hash,
        'processing'::@extschema@.idem_status, 0::pg_catalog.int4, claim_policy_probe.claimed_by,
        pg_catalog.now(), pg_catalog.now(), '5 minutes'::pg_catalog.interval,
        '24 hours'::pg_catalog.interval, pg_catalog.now(), pg_catalog.now(), pg_catalog.now());
    RAISE EXCEPTION 'claim_policy_probe wrote a row' USING ERRCODE = 'XX000';
EXCEPTION WHEN check_violation THEN
    RETURN;
END
$fn$;
COMMENT ON FUNCTION idempotency.claim_policy_probe(pg_catalog.text, pg_catalog.text, pg_catalog.text, pg_catalog.text) IS
    'Internal (idem_claim under row-level security): 42501 if the policies refuse a new row of the key';
