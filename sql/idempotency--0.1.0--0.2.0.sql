-- idempotency 0.1.0 -> 0.2.0, run by ALTER EXTENSION idempotency UPDATE [TO '0.2.0'].
--
-- Written by hand (docs/releasing.md): it turns the objects that sql/idempotency--0.1.0.sql
-- created into exactly those a fresh CREATE EXTENSION of 0.2.0 creates. tests/upgrade.rs
-- proves it: the upgraded catalog must equal a fresh install's, and every row must survive.
-- Like the install script, everything is schema-qualified (@extschema@ for the functions and
-- types, idempotency.* for the tables), and the tables are changed in place (ALTER), never
-- re-created: their rows are the users' data.
--
-- Once 0.2.0 is released this file is frozen (listed in sql/released.sha256): never edit it.

-- Most of 0.2.0 is in the library (the security fixes: schema-qualified SPI statements,
-- decisions after the table lock, private claim lock class, clock leases, the worker's
-- restricted maintenance): the functions keep their C symbols, so the 0.1.0 definitions
-- already call the new code. The SQL objects that changed are below.

-- ==== 0.2.0 changes to SQL objects: add them below, one block per change ====
--
-- How (docs/releasing.md, "Writing the upgrade script"):
--  - a new parameter with a DEFAULT (e.g. idem_claim's `wait interval DEFAULT NULL`): the
--    signature changes, so CREATE OR REPLACE cannot do it. DROP FUNCTION the old signature
--    (no SQL object of the extension depends on it), then CREATE FUNCTION the new one exactly
--    as in sql/claim.sql, with the same COMMENT; CREATE FUNCTION inside ALTER EXTENSION UPDATE
--    makes it a member of the extension. A user's view or function that calls the old
--    signature blocks the DROP: say so in the release notes.
--  - a new function: CREATE FUNCTION + COMMENT, as in its sql/*.sql file.
--  - a changed body or attribute, same signature: CREATE OR REPLACE FUNCTION.
--  - a new column: ALTER TABLE idempotency.<table> ADD COLUMN ... at the END of the table in
--    the install script too (column order is compared), with the same DEFAULT/NOT NULL.
--  - a new constraint or index: ALTER TABLE ... ADD CONSTRAINT / CREATE INDEX, same name.
--  - a new enum label: ALTER TYPE @extschema@.<type> ADD VALUE ... (BEFORE/AFTER to match the
--    install script's order).
-- Then run tests/upgrade.rs (catalog equality + data) on every major.

-- ---- issue #16: idem_grant_statements / idem_grant / idem_revoke, new functions (as in
-- ---- sql/grants.sql; keep the two identical until 0.2.0 is released)
CREATE FUNCTION @extschema@.idem_grant_statements(profile pg_catalog.text)
RETURNS pg_catalog.text[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT CASE
    WHEN profile OPERATOR(pg_catalog.=) 'app' THEN ARRAY[
        'USAGE ON SCHEMA idempotency',
        'SELECT, INSERT, UPDATE, DELETE ON idempotency.requests',
        'SELECT, INSERT, UPDATE ON idempotency.inbox, idempotency.versions',
        'SELECT, INSERT ON idempotency.outbox']
    WHEN profile OPERATOR(pg_catalog.=) 'publisher' THEN ARRAY[
        'USAGE ON SCHEMA idempotency',
        'SELECT, UPDATE ON idempotency.outbox']
    WHEN profile OPERATOR(pg_catalog.=) 'upkeep' THEN ARRAY[
        'USAGE ON SCHEMA idempotency',
        'SELECT, UPDATE, DELETE ON idempotency.requests, idempotency.inbox, idempotency.outbox']
    WHEN profile OPERATOR(pg_catalog.=) 'monitor' THEN ARRAY[
        'USAGE ON SCHEMA idempotency',
        'SELECT ON idempotency.stats',
        'EXECUTE ON FUNCTION @extschema@.idem_metrics()']
END
$$;
COMMENT ON FUNCTION @extschema@.idem_grant_statements(pg_catalog.text) IS
    'The privileges of an idem_grant profile (app, publisher, upkeep, monitor); NULL for an unknown one';

CREATE FUNCTION @extschema@.idem_grant(role pg_catalog.regrole, profile pg_catalog.text)
RETURNS void
LANGUAGE plpgsql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    privileges pg_catalog.text[] := @extschema@.idem_grant_statements(profile);
    grant_ pg_catalog.text;
BEGIN
    IF privileges IS NULL THEN
        RAISE EXCEPTION 'unknown idem_grant profile "%"', profile
            USING ERRCODE = '22023', HINT = 'The profiles are app, publisher, upkeep and monitor.';
    END IF;
    -- GRANT without the grant option only warns; say it plainly instead.
    IF NOT pg_catalog.pg_has_role((SELECT nspowner FROM pg_catalog.pg_namespace
                                   WHERE nspname OPERATOR(pg_catalog.=) 'idempotency'), 'USAGE') THEN
        RAISE EXCEPTION 'permission denied to grant idempotency privileges'
            USING ERRCODE = '42501', HINT = 'Run it as the owner of schema idempotency.';
    END IF;
    FOREACH grant_ IN ARRAY privileges LOOP
        EXECUTE pg_catalog.format('GRANT %s TO %s', grant_, role);
    END LOOP;
END
$$;
COMMENT ON FUNCTION @extschema@.idem_grant(pg_catalog.regrole, pg_catalog.text) IS
    'Grant a role the privileges of a profile: app (claims, inbox, ordered updates, outbox put), publisher (outbox take/ack/nack), upkeep (purges and reclaims by hand), monitor (stats and metrics)';

CREATE FUNCTION @extschema@.idem_revoke(role pg_catalog.regrole, profile pg_catalog.text)
RETURNS void
LANGUAGE plpgsql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    privileges pg_catalog.text[] := @extschema@.idem_grant_statements(profile);
    grant_ pg_catalog.text;
BEGIN
    IF privileges IS NULL THEN
        RAISE EXCEPTION 'unknown idem_grant profile "%"', profile
            USING ERRCODE = '22023', HINT = 'The profiles are app, publisher, upkeep and monitor.';
    END IF;
    -- GRANT without the grant option only warns; say it plainly instead.
    IF NOT pg_catalog.pg_has_role((SELECT nspowner FROM pg_catalog.pg_namespace
                                   WHERE nspname OPERATOR(pg_catalog.=) 'idempotency'), 'USAGE') THEN
        RAISE EXCEPTION 'permission denied to grant idempotency privileges'
            USING ERRCODE = '42501', HINT = 'Run it as the owner of schema idempotency.';
    END IF;
    FOREACH grant_ IN ARRAY privileges LOOP
        EXECUTE pg_catalog.format('REVOKE %s FROM %s', grant_, role);
    END LOOP;
END
$$;
COMMENT ON FUNCTION @extschema@.idem_revoke(pg_catalog.regrole, pg_catalog.text) IS
    'Take back what idem_grant gave a role for a profile';
