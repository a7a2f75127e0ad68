-- Move a database from the portable edition to the native extension, in place, in one
-- transaction (docs/managed.md): psql -v ON_ERROR_STOP=1 -f, by a superuser, on a server where the native extension
-- is installed (and preloaded, for the worker and the counters). Every row is kept: the
-- records replay, leases and attempts go on, the outbox keeps its ids.
-- Privileges and row-level security policies on the tables are not carried over: run your
-- idem_grant calls and the tenant recipe again afterwards.
BEGIN;
SET LOCAL search_path = pg_catalog, pg_temp;
ALTER SCHEMA idempotency RENAME TO idempotency_portable;
DO $move$
DECLARE
    f pg_catalog.regprocedure;
BEGIN
    FOR f IN SELECT p.oid::pg_catalog.regprocedure FROM pg_catalog.pg_proc AS p
              WHERE p.pronamespace OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.regnamespace
                AND p.proname OPERATOR(pg_catalog.=) ANY ('{@NAMES@}'::pg_catalog.name[])
             UNION ALL
             SELECT p.oid::pg_catalog.regprocedure FROM pg_catalog.pg_proc AS p
              WHERE p.pronamespace OPERATOR(pg_catalog.=) 'idempotency_portable'::pg_catalog.regnamespace
                AND p.proname OPERATOR(pg_catalog.~~) 'portable\_%' LOOP
        EXECUTE pg_catalog.format('DROP FUNCTION %s', f);
    END LOOP;
END
$move$;
ALTER TYPE @extschema@.idem_status RENAME TO idem_status_portable;
ALTER TYPE @extschema@.idem_outcome RENAME TO idem_outcome_portable;
DROP TYPE @extschema@.idem_claim_result;
DROP TYPE @extschema@.idem_call_result;
CREATE EXTENSION idempotency SCHEMA @extschema@;
INSERT INTO idempotency.requests
SELECT scope, key, request_hash, status::pg_catalog.text::@extschema@.idem_status, attempt, response,
       recovery_point, failure_code, failure_message, claimed_by, claimed_at, locked_until, lease,
       retention, created_at, updated_at, expires_at
  FROM idempotency_portable.requests;
INSERT INTO idempotency.inbox SELECT * FROM idempotency_portable.inbox;
INSERT INTO idempotency.versions SELECT * FROM idempotency_portable.versions;
INSERT INTO idempotency.outbox OVERRIDING SYSTEM VALUE SELECT * FROM idempotency_portable.outbox;
SELECT pg_catalog.setval('idempotency.outbox_id_seq'::pg_catalog.regclass, s.last_value, s.is_called)
  FROM idempotency_portable.outbox_id_seq AS s;
DROP SCHEMA idempotency_portable CASCADE;
DROP TYPE @extschema@.idem_status_portable;
DROP TYPE @extschema@.idem_outcome_portable;
COMMIT;
