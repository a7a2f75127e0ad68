-- idem_call and its error classification (src/entry/call.rs). Its result type is in
-- sql/bootstrap.sql: the portable edition's helpers return it before idem_call is declared.

CREATE FUNCTION @extschema@.idem_call(
    scope pg_catalog.text,
    key pg_catalog.text,
    request pg_catalog.jsonb,
    fn pg_catalog.regprocedure,
    lease pg_catalog.interval DEFAULT '5 minutes',
    retention pg_catalog.interval DEFAULT '24 hours'
) RETURNS @extschema@.idem_call_result
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'idem_call';
COMMENT ON FUNCTION @extschema@.idem_call IS
    'Run fn(request) at most once per (scope, key): replay a stored response or final failure, or run it in a subtransaction and record the outcome';

CREATE FUNCTION @extschema@.idem_retryable(
    sqlstate pg_catalog.text
) RETURNS pg_catalog.bool
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'idem_retryable';
COMMENT ON FUNCTION @extschema@.idem_retryable IS
    'Is an error with this SQLSTATE transient (retry the whole transaction)? idem_call re-raises exactly these';
