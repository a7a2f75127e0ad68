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
END
$$;
COMMENT ON FUNCTION @extschema@.idem_revoke(pg_catalog.regrole, pg_catalog.text) IS
    'Take back what idem_grant gave a role for a profile';

-- ---- issue #13: idem_claim(..., wait interval DEFAULT NULL). The signature changes, so the
-- ---- 0.1.0 function is dropped and the new one created as in sql/claim.sql (keep the two
-- ---- identical until 0.2.0 is released). A user's view or function that calls the old
-- ---- six-argument signature blocks the DROP.
DROP FUNCTION @extschema@.idem_claim(pg_catalog.text, pg_catalog.text, pg_catalog.text,
    pg_catalog.interval, pg_catalog.interval, pg_catalog.text);
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

-- ---- issue #13: the HTTP response helpers, new functions (as in sql/http.sql; keep the two
-- ---- identical until 0.2.0 is released)
-- The HTTP response contract (docs/http.md): the one shape in which every HTTP adapter stores
-- the response it sent, and reads it back on a replay.
--
--   {"status": 201,
--    "headers": {"content-type": "application/json", "location": "/payments/7"},
--    "body": "{\"payment_id\":7}"}
--
-- `body` is the exact text that was sent (a JSON string, or null for no body), so a replay is
-- byte-identical; `headers` holds only the allow-listed ones, names in lower case.
-- These helpers pin search_path and qualify everything: the caller's path changes nothing.

CREATE FUNCTION @extschema@.idem_http_headers()
RETURNS pg_catalog.text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
SELECT ARRAY['cache-control', 'content-language', 'content-location', 'content-type', 'etag',
             'expires', 'last-modified', 'link', 'location']::pg_catalog.text[]
$fn$;
COMMENT ON FUNCTION @extschema@.idem_http_headers() IS
    'The response headers idem_http_response keeps (lower case); others are not stored';

CREATE FUNCTION @extschema@.idem_http_response(
    status pg_catalog.int4,
    headers pg_catalog.jsonb DEFAULT '{}',
    body pg_catalog.text DEFAULT NULL
) RETURNS pg_catalog.jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    allowed constant pg_catalog.text[] := @extschema@.idem_http_headers();
    kept pg_catalog.jsonb := '{}';
    header record;
    hname pg_catalog.text;
BEGIN
    IF status IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'status must not be null';
    END IF;
    IF status OPERATOR(pg_catalog.<) 100 OR status OPERATOR(pg_catalog.>) 599 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = pg_catalog.format('HTTP status %s is not between 100 and 599', status);
    END IF;
    IF headers IS NOT NULL
       AND pg_catalog.jsonb_typeof(headers) OPERATOR(pg_catalog.<>) 'object' THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'headers must be a JSON object of header names to string values';
    END IF;
    FOR header IN SELECT e.key, e.value FROM pg_catalog.jsonb_each(headers) AS e LOOP
        hname := pg_catalog.lower(header.key);
        CONTINUE WHEN NOT (hname OPERATOR(pg_catalog.=) ANY (allowed));
        -- A stored value is sent again as it is: it must be one plain header line.
        IF pg_catalog.jsonb_typeof(header.value) OPERATOR(pg_catalog.<>) 'string'
           OR (header.value OPERATOR(pg_catalog.#>>) '{}'::pg_catalog.text[])
              OPERATOR(pg_catalog.~) '[\r\n\x00]' THEN
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = pg_catalog.format('header %s must be a string without line breaks', hname);
        END IF;
        kept := kept OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object(hname, header.value);
    END LOOP;
    RETURN pg_catalog.jsonb_build_object('status', status, 'headers', kept, 'body', body);
END
$fn$;
COMMENT ON FUNCTION @extschema@.idem_http_response(pg_catalog.int4, pg_catalog.jsonb, pg_catalog.text) IS
    'The stored form of an HTTP response: {status, headers (allow-listed, lower case), body (exact text)}';

CREATE FUNCTION @extschema@.idem_http_fail(
    scope pg_catalog.text,
    key pg_catalog.text,
    response pg_catalog.jsonb,
    attempt pg_catalog.int4 DEFAULT NULL
) RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    stored pg_catalog.jsonb;
    code pg_catalog.int4;
BEGIN
    IF COALESCE(pg_catalog.jsonb_typeof(response OPERATOR(pg_catalog.->) 'status'), '')
           OPERATOR(pg_catalog.<>) 'number' THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'response must be a document made by idem_http_response';
    END IF;
    code := (response OPERATOR(pg_catalog.->>) 'status')::pg_catalog.int4;
    IF code OPERATOR(pg_catalog.<) 400 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = pg_catalog.format('a final failure needs an error status (400-599), not %s', code);
    END IF;
    stored := @extschema@.idem_http_response(code, response OPERATOR(pg_catalog.->) 'headers',
                                             response OPERATOR(pg_catalog.->>) 'body');
    PERFORM @extschema@.idem_fail(scope, key, false, 'http_response', stored::pg_catalog.text, attempt);
END
$fn$;
COMMENT ON FUNCTION @extschema@.idem_http_fail(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.int4) IS
    'processing -> failed_final, keeping an HTTP error response (idem_http_response form) to replay';

CREATE FUNCTION @extschema@.idem_http_replay(claim @extschema@.idem_claim_result)
RETURNS pg_catalog.jsonb
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF claim.outcome OPERATOR(pg_catalog.=) 'replay_success'::@extschema@.idem_outcome THEN
        IF COALESCE(pg_catalog.jsonb_typeof(claim.response OPERATOR(pg_catalog.->) 'status'), '')
               OPERATOR(pg_catalog.=) 'number'
           AND claim.response OPERATOR(pg_catalog.?) 'headers' THEN
            RETURN claim.response;
        END IF;
        -- Stored by something other than an HTTP adapter: send the JSON itself.
        RETURN @extschema@.idem_http_response(200, '{"content-type": "application/json"}',
                                              claim.response::pg_catalog.text);
    ELSIF claim.outcome OPERATOR(pg_catalog.=) 'final_failure'::@extschema@.idem_outcome THEN
        IF claim.failure_code OPERATOR(pg_catalog.=) 'http_response' THEN
            RETURN claim.failure_message::pg_catalog.jsonb;
        END IF;
        RETURN @extschema@.idem_http_response(500, '{"content-type": "application/problem+json"}',
            pg_catalog.jsonb_build_object('type', 'about:blank', 'title', 'The request failed',
                'status', 500, 'code', claim.failure_code,
                'detail', claim.failure_message)::pg_catalog.text);
    END IF;
    RETURN NULL;
END
$fn$;
COMMENT ON FUNCTION @extschema@.idem_http_replay(@extschema@.idem_claim_result) IS
    'The response to send again for a claim that replays (replay_success, final_failure); NULL for other outcomes';

-- 0.2.0: idem_distribute (Citus; sql/citus.sql).
-- idem_distribute: idempotency.requests as a Citus distributed table, and the hot functions
-- delegated to the worker that holds the key's shard (docs/scale-out.md). Without Citus it
-- raises P4060; the extension itself never depends on Citus (this body is only parsed, and
-- Citus's functions are looked up when it runs).
CREATE FUNCTION @extschema@.idem_distribute(
    distribution_column pg_catalog.text DEFAULT 'key',
    colocate_with pg_catalog.text DEFAULT NULL,
    shard_count pg_catalog.int4 DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    fn pg_catalog.regprocedure;
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension
                   WHERE extname OPERATOR(pg_catalog.=) 'citus') THEN
        RAISE EXCEPTION 'idem_distribute needs the citus extension in this database'
            USING ERRCODE = 'P4060',
                  HINT = 'CREATE EXTENSION citus on the coordinator first (docs/scale-out.md).';
    END IF;
    IF distribution_column IS NULL
       OR (distribution_column OPERATOR(pg_catalog.<>) 'key' AND distribution_column OPERATOR(pg_catalog.<>) 'scope') THEN
        RAISE EXCEPTION 'idem_distribute: distribution_column must be ''key'' or ''scope'', not %',
            COALESCE(pg_catalog.quote_literal(distribution_column), 'NULL')
            USING ERRCODE = '22023';
    END IF;
    IF shard_count IS NOT NULL AND shard_count OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION 'idem_distribute: shard_count must be positive, not %', shard_count
            USING ERRCODE = '22023';
    END IF;
    IF EXISTS (SELECT FROM pg_catalog.pg_dist_local_group
               WHERE groupid OPERATOR(pg_catalog.<>) 0) THEN
        RAISE EXCEPTION 'idem_distribute runs on the Citus coordinator, not on a worker'
            USING ERRCODE = 'P4060';
    END IF;
    IF EXISTS (SELECT FROM pg_catalog.pg_dist_partition
               WHERE logicalrelid OPERATOR(pg_catalog.=) 'idempotency.requests'::pg_catalog.regclass) THEN
        RAISE EXCEPTION 'idempotency.requests is already distributed'
            USING ERRCODE = 'P4060',
                  HINT = 'SELECT pg_catalog.undistribute_table(''idempotency.requests'') first to change its shape.';
    END IF;
    IF shard_count IS NULL THEN
        PERFORM pg_catalog.create_distributed_table('idempotency.requests'::pg_catalog.regclass,
            distribution_column, colocate_with => COALESCE(colocate_with, 'default'));
    ELSE
        PERFORM pg_catalog.create_distributed_table('idempotency.requests'::pg_catalog.regclass,
            distribution_column, colocate_with => COALESCE(colocate_with, 'default'),
            shard_count => shard_count);
    END IF;
    -- A call through the coordinator outside a transaction block runs on the worker with the
    -- shard of its distribution argument, in one round trip.
    FOREACH fn IN ARRAY ARRAY[
        '@extschema@.idem_claim(pg_catalog.text, pg_catalog.text, pg_catalog.text, pg_catalog.interval, pg_catalog.interval, pg_catalog.text, pg_catalog.interval)',
        '@extschema@.idem_complete(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.int4)',
        '@extschema@.idem_fail(pg_catalog.text, pg_catalog.text, pg_catalog.bool, pg_catalog.text, pg_catalog.text, pg_catalog.int4)',
        '@extschema@.idem_checkpoint(pg_catalog.text, pg_catalog.text, pg_catalog.text, pg_catalog.int4, pg_catalog.interval)',
        '@extschema@.idem_forget(pg_catalog.text, pg_catalog.text)']::pg_catalog.regprocedure[]
    LOOP
        PERFORM pg_catalog.create_distributed_function(fn, distribution_column,
            colocate_with => 'idempotency.requests');
    END LOOP;
END
$fn$;
COMMENT ON FUNCTION @extschema@.idem_distribute(pg_catalog.text, pg_catalog.text, pg_catalog.int4) IS
    'Citus: distribute idempotency.requests by key or scope and delegate the hot functions to the shard''s worker';
REVOKE ALL ON FUNCTION @extschema@.idem_distribute(pg_catalog.text, pg_catalog.text, pg_catalog.int4) FROM PUBLIC;

-- ---- issue #25: lease and retention bounded to 100 years (requests_intervals_check, as in
-- ---- sql/bootstrap.sql), so that upkeep's now() + retention never leaves the timestamp range.
-- ---- Rows beyond the bound (only a hand-made UPDATE could store one) are clamped first.
UPDATE idempotency.requests
   SET lease = LEAST(lease, '100 years'::pg_catalog.interval),
       retention = LEAST(retention, '100 years'::pg_catalog.interval)
 WHERE lease OPERATOR(pg_catalog.>) '100 years'::pg_catalog.interval
    OR retention OPERATOR(pg_catalog.>) '100 years'::pg_catalog.interval;
ALTER TABLE idempotency.requests DROP CONSTRAINT requests_intervals_check,
    ADD CONSTRAINT requests_intervals_check CHECK (lease > '0'::pg_catalog.interval AND lease <= '100 years'::pg_catalog.interval
                                               AND retention > '0'::pg_catalog.interval AND retention <= '100 years'::pg_catalog.interval);

-- ---- issue #25: the policy probe of a claim under row-level security, a new function (as in
-- ---- sql/claim.sql; keep the two identical until 0.2.0 is released)
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

-- ---- issue #25: warn when the extension's schema is writable by others (as at the end of
-- ---- sql/grants.sql)
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
