-- Upkeep and visibility: idem_reclaim / idem_purge (src/entry/maintenance.rs), and the
-- idempotency.stats view. Everything is schema-qualified: a view's operators and functions are
-- resolved now.

CREATE FUNCTION @extschema@.idem_reclaim(batch pg_catalog.int4 DEFAULT 10000)
RETURNS pg_catalog.int8
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'idem_reclaim_wrapper';
COMMENT ON FUNCTION @extschema@.idem_reclaim(pg_catalog.int4) IS
    'Processing records whose lease ended more than idempotency.reclaim_grace ago become failed_retryable (lease_expired); at most batch rows; returns how many';

CREATE FUNCTION @extschema@.idem_purge(batch pg_catalog.int4 DEFAULT 10000)
RETURNS pg_catalog.int8
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'idem_purge_wrapper';
COMMENT ON FUNCTION @extschema@.idem_purge(pg_catalog.int4) IS
    'Deletes finished records past expires_at (never processing ones); at most batch rows; returns how many';

CREATE VIEW idempotency.stats AS
SELECT r.scope,
       r.status,
       pg_catalog.count(*) AS records,
       pg_catalog.min(r.created_at) AS oldest_created_at,
       pg_catalog.max(r.attempt) AS max_attempt,
       pg_catalog.count(*) FILTER (
           WHERE r.status OPERATOR(pg_catalog.=) 'processing'::@extschema@.idem_status
             AND r.locked_until OPERATOR(pg_catalog.<) pg_catalog.now()
       ) AS expired_leases
FROM idempotency.requests AS r
GROUP BY r.scope, r.status;
COMMENT ON VIEW idempotency.stats IS
    'Per scope and status: records, oldest created_at, highest attempt, processing records whose lease has ended';

REVOKE ALL ON idempotency.stats FROM PUBLIC;
GRANT SELECT ON idempotency.stats TO pg_monitor;
GRANT USAGE ON SCHEMA idempotency TO pg_monitor;
