-- The claim protocol's functions. They are C functions written against fcinfo (src/claim.rs)
-- so they can take jsonb and intervals as raw datums and return one composite row.
-- Their SQL is fully schema-qualified, so the caller's search_path cannot redirect it.

CREATE FUNCTION @extschema@.idem_claim(
    scope pg_catalog.text,
    key pg_catalog.text,
    request_hash pg_catalog.text,
    lease pg_catalog.interval DEFAULT '5 minutes',
    retention pg_catalog.interval DEFAULT '24 hours',
    claimed_by pg_catalog.text DEFAULT NULL,
    OUT outcome @extschema@.idem_outcome,
    OUT attempt pg_catalog.int4,
    OUT response pg_catalog.jsonb,
    OUT recovery_point pg_catalog.text,
    OUT failure_code pg_catalog.text,
    OUT failure_message pg_catalog.text,
    OUT locked_until pg_catalog.timestamptz,
    OUT expires_at pg_catalog.timestamptz
) RETURNS record
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'idem_claim';
COMMENT ON FUNCTION @extschema@.idem_claim IS
    'Claim (scope, key) for one request: new_claim, replay_success, processing_active, processing_stale, retryable_failure or final_failure';

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
