-- idem_grant / idem_revoke: the documented grant recipes as one call each (src/entry/schema.rs).
-- Roles are cluster-wide and belong to the user: the extension creates none; these grant a
-- profile's privileges on this database's objects to a role that exists. Grants on extension
-- tables are kept by pg_dump (as changes to the objects' initial privileges).
-- SECURITY INVOKER: only a role that may grant these privileges (the owner) can call them.

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
        'SELECT, INSERT ON idempotency.outbox',
        'EXECUTE ON FUNCTION idempotency.cdc_message(text,text,jsonb,jsonb)',
        'EXECUTE ON FUNCTION @extschema@.idem_cdc_verify(jsonb)',
        'EXECUTE ON FUNCTION @extschema@.idem_cdc_verified(text)']
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
    -- The generations of idempotency.requests (sql/layout.sql) carry its grants.
    PERFORM idempotency.layout_sync_grants();
END
$$;
COMMENT ON FUNCTION @extschema@.idem_grant(pg_catalog.regrole, pg_catalog.text) IS
    'Grant a role the privileges of a profile: app (claims, inbox, ordered updates, outbox put, CDC messages signed and verified), publisher (outbox take/ack/nack), upkeep (purges and reclaims by hand), monitor (stats and metrics)';

CREATE FUNCTION @extschema@.idem_revoke(role pg_catalog.regrole, profile pg_catalog.text)
RETURNS void
LANGUAGE plpgsql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    privileges pg_catalog.text[] := @extschema@.idem_grant_statements(profile);
    revoke_ record;
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
    -- Each profile as (kind, object, privilege) atoms; a profile is still held when every atom
    -- of it is granted to the role itself. Only atoms no held profile needs are revoked.
    FOR revoke_ IN
        WITH statements AS (
            SELECT p.name AS profile,
                   pg_catalog.regexp_match(s.statement, '^(.*) ON (SCHEMA |FUNCTION )?(.*)$') AS m
            FROM pg_catalog.unnest(ARRAY['app', 'publisher', 'upkeep', 'monitor']::pg_catalog.text[]) AS p(name),
                 pg_catalog.unnest(@extschema@.idem_grant_statements(p.name)) AS s(statement)
        ), atoms AS (
            SELECT st.profile, COALESCE(pg_catalog.btrim(st.m[2]), 'TABLE') AS kind,
                   o.object, v.privilege
            FROM statements AS st,
                 pg_catalog.regexp_split_to_table(st.m[1], ', ') AS v(privilege),
                 pg_catalog.regexp_split_to_table(st.m[3], ', ') AS o(object)
        ), held AS (
            SELECT a.profile, a.kind, a.object, a.privilege, CASE
                WHEN a.kind OPERATOR(pg_catalog.=) 'SCHEMA' THEN EXISTS (
                    SELECT FROM pg_catalog.pg_namespace AS n, pg_catalog.aclexplode(n.nspacl) AS e
                    WHERE n.nspname OPERATOR(pg_catalog.=) a.object
                      AND e.grantee OPERATOR(pg_catalog.=) role::pg_catalog.oid
                      AND e.privilege_type OPERATOR(pg_catalog.=) a.privilege)
                WHEN a.kind OPERATOR(pg_catalog.=) 'FUNCTION' THEN EXISTS (
                    SELECT FROM pg_catalog.pg_proc AS f, pg_catalog.aclexplode(f.proacl) AS e
                    WHERE f.oid OPERATOR(pg_catalog.=) a.object::pg_catalog.regprocedure::pg_catalog.oid
                      AND e.grantee OPERATOR(pg_catalog.=) role::pg_catalog.oid
                      AND e.privilege_type OPERATOR(pg_catalog.=) a.privilege)
                ELSE EXISTS (
                    SELECT FROM pg_catalog.pg_class AS c, pg_catalog.aclexplode(c.relacl) AS e
                    WHERE c.oid OPERATOR(pg_catalog.=) a.object::pg_catalog.regclass::pg_catalog.oid
                      AND e.grantee OPERATOR(pg_catalog.=) role::pg_catalog.oid
                      AND e.privilege_type OPERATOR(pg_catalog.=) a.privilege)
            END AS granted
            FROM atoms AS a
        ), whole AS (
            SELECT k.profile FROM held AS k GROUP BY k.profile HAVING pg_catalog.bool_and(k.granted)
        ), kept AS (
            SELECT h.kind, h.object, h.privilege FROM held AS h, whole AS w
            WHERE h.profile OPERATOR(pg_catalog.=) w.profile
              AND h.profile OPERATOR(pg_catalog.<>) idem_revoke.profile
        )
        SELECT DISTINCT h.kind, h.object, h.privilege FROM held AS h
        WHERE h.profile OPERATOR(pg_catalog.=) idem_revoke.profile
          AND NOT EXISTS (SELECT FROM kept AS k
                          WHERE k.kind OPERATOR(pg_catalog.=) h.kind
                            AND k.object OPERATOR(pg_catalog.=) h.object
                            AND k.privilege OPERATOR(pg_catalog.=) h.privilege)
    LOOP
        EXECUTE pg_catalog.format('REVOKE %s ON %s %s FROM %s',
                                  revoke_.privilege, revoke_.kind, revoke_.object, role);
    END LOOP;
    PERFORM idempotency.layout_sync_grants();
END
$$;
COMMENT ON FUNCTION @extschema@.idem_revoke(pg_catalog.regrole, pg_catalog.text) IS
    'Take back what idem_grant gave a role for a profile';

-- A role that may create objects in the extension's schema can plant overloads of its
-- functions there (a text look-alike of a jsonb parameter wins an untyped argument). The
-- extension's own SQL types every argument, but applications call these functions too: say so
-- loudly at install time (docs/security.md, "The extension's schema").
DO $warn$
DECLARE
    writers pg_catalog.text;
BEGIN
    SELECT pg_catalog.string_agg(CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0::pg_catalog.oid
                                      THEN 'PUBLIC'
                                      ELSE a.grantee::pg_catalog.regrole::pg_catalog.text END, ', ')
      INTO writers
      FROM pg_catalog.pg_namespace AS n,
           pg_catalog.aclexplode(COALESCE(n.nspacl, pg_catalog.acldefault('n'::pg_catalog.char, n.nspowner))) AS a
     WHERE n.oid OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.regnamespace::pg_catalog.oid
       AND a.privilege_type OPERATOR(pg_catalog.=) 'CREATE'
       AND a.grantee OPERATOR(pg_catalog.<>) n.nspowner;
    IF writers IS NOT NULL THEN
        RAISE WARNING 'idempotency: schema @extschema@ is writable by %, who can plant look-alikes of the extension''s functions there', writers
            USING DETAIL = 'Anyone who may CREATE in the schema of the functions can make an application''s call with an untyped argument run their code instead.',
                  HINT = 'REVOKE CREATE ON SCHEMA @extschema@ FROM PUBLIC, or create the extension in a schema of its own (CREATE SCHEMA idem; CREATE EXTENSION idempotency SCHEMA idem).';
    END IF;
END
$warn$;
