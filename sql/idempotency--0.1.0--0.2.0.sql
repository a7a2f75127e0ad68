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
-- byte-identical; `headers` holds only the allow-listed ones (idem_http_headers() plus the
-- caller's `keep`, never a name of the never-list below), names in lower case, values one line.
-- A response stored without its body (too large) carries `idempotent-body-omitted: true`.
-- These helpers pin search_path, qualify every call and type every literal: neither the caller's
-- path nor a look-alike function in this schema changes what they run.

CREATE FUNCTION @extschema@.idem_http_headers()
RETURNS pg_catalog.text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
SELECT ARRAY['cache-control', 'content-language', 'content-location', 'content-type', 'etag',
             'expires', 'last-modified', 'link', 'location',
             'idempotent-body-omitted']::pg_catalog.text[]
$fn$;
COMMENT ON FUNCTION @extschema@.idem_http_headers() IS
    'The response headers idem_http_response keeps (lower case); others are not stored';

CREATE FUNCTION @extschema@.idem_http_response(
    status pg_catalog.int4,
    headers pg_catalog.jsonb DEFAULT '{}'::pg_catalog.jsonb,
    body pg_catalog.text DEFAULT NULL::pg_catalog.text,
    keep pg_catalog.text[] DEFAULT NULL::pg_catalog.text[]
) RETURNS pg_catalog.jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    -- Never stored nor replayed, even when asked for in keep: credentials, redirects by
    -- timer, and what belongs to one connection or one message.
    never constant pg_catalog.text[] := ARRAY['set-cookie', 'set-cookie2', 'authorization',
        'proxy-authorization', 'www-authenticate', 'proxy-authenticate', 'refresh', 'connection',
        'keep-alive', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'content-length',
        'date']::pg_catalog.text[];
    allowed pg_catalog.text[];
    kept pg_catalog.jsonb := '{}'::pg_catalog.jsonb;
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
       AND pg_catalog.jsonb_typeof(headers) OPERATOR(pg_catalog.<>) 'object'::pg_catalog.text THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'headers must be a JSON object of header names to string values';
    END IF;
    allowed := pg_catalog.array_cat(@extschema@.idem_http_headers(),
        ARRAY(SELECT pg_catalog.lower(k) FROM pg_catalog.unnest(keep) AS k WHERE k IS NOT NULL));
    FOR header IN SELECT e.key, e.value FROM pg_catalog.jsonb_each(headers) AS e LOOP
        hname := pg_catalog.lower(header.key);
        CONTINUE WHEN NOT (hname OPERATOR(pg_catalog.=) ANY (allowed))
                   OR hname OPERATOR(pg_catalog.=) ANY (never);
        -- A stored value is sent again as it is: it must be one plain header line.
        IF pg_catalog.jsonb_typeof(header.value) OPERATOR(pg_catalog.<>) 'string'::pg_catalog.text
           OR (header.value OPERATOR(pg_catalog.#>>) '{}'::pg_catalog.text[])
              OPERATOR(pg_catalog.~) '[\r\n\x00]'::pg_catalog.text THEN
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = pg_catalog.format('header %s must be a string without line breaks', hname);
        END IF;
        kept := kept OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object(hname, header.value);
    END LOOP;
    RETURN pg_catalog.jsonb_build_object('status'::pg_catalog.text, status,
        'headers'::pg_catalog.text, kept, 'body'::pg_catalog.text, body);
END
$fn$;
COMMENT ON FUNCTION @extschema@.idem_http_response(pg_catalog.int4, pg_catalog.jsonb, pg_catalog.text, pg_catalog.text[]) IS
    'The stored form of an HTTP response: {status, headers (allow-listed plus keep, lower case), body (exact text)}';

CREATE FUNCTION @extschema@.idem_http_fail(
    scope pg_catalog.text,
    key pg_catalog.text,
    response pg_catalog.jsonb,
    attempt pg_catalog.int4 DEFAULT NULL::pg_catalog.int4
) RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    stored pg_catalog.jsonb;
    code pg_catalog.int4;
BEGIN
    IF COALESCE(pg_catalog.jsonb_typeof(response OPERATOR(pg_catalog.->) 'status'::pg_catalog.text),
                ''::pg_catalog.text) OPERATOR(pg_catalog.<>) 'number'::pg_catalog.text THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'response must be a document made by idem_http_response';
    END IF;
    code := (response OPERATOR(pg_catalog.->>) 'status'::pg_catalog.text)::pg_catalog.int4;
    IF code OPERATOR(pg_catalog.<) 400 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = pg_catalog.format('a final failure needs an error status (400-599), not %s', code);
    END IF;
    -- Checked again (never-list, line breaks); the names it has were kept by its maker.
    stored := @extschema@.idem_http_response(code,
        response OPERATOR(pg_catalog.->) 'headers'::pg_catalog.text,
        response OPERATOR(pg_catalog.->>) 'body'::pg_catalog.text,
        ARRAY(SELECT pg_catalog.jsonb_object_keys(response OPERATOR(pg_catalog.->) 'headers'::pg_catalog.text)
              WHERE pg_catalog.jsonb_typeof(response OPERATOR(pg_catalog.->) 'headers'::pg_catalog.text)
                    OPERATOR(pg_catalog.=) 'object'::pg_catalog.text));
    PERFORM @extschema@.idem_fail(scope, key, false, 'http_response'::pg_catalog.text,
                                  stored::pg_catalog.text, attempt);
END
$fn$;
COMMENT ON FUNCTION @extschema@.idem_http_fail(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.int4) IS
    'processing -> failed_final, keeping an HTTP error response (idem_http_response form) to replay';

-- What is replayed is checked again as it is read: a document can reach the table through
-- idem_complete or idem_fail by hand, so the allow-list, the never-list and the one-line rule
-- are applied here too (a bad header is left out, not sent). The problem built for a failure
-- that is not an HTTP response says nothing of the stored code or message (internal text).
CREATE FUNCTION @extschema@.idem_http_replay(
    claim @extschema@.idem_claim_result,
    keep pg_catalog.text[] DEFAULT NULL::pg_catalog.text[]
) RETURNS pg_catalog.jsonb
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    never constant pg_catalog.text[] := ARRAY['set-cookie', 'set-cookie2', 'authorization',
        'proxy-authorization', 'www-authenticate', 'proxy-authenticate', 'refresh', 'connection',
        'keep-alive', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'content-length',
        'date']::pg_catalog.text[];
    allowed pg_catalog.text[];
    doc pg_catalog.jsonb;
    code pg_catalog.numeric;
    kept pg_catalog.jsonb := '{}'::pg_catalog.jsonb;
    header record;
    hname pg_catalog.text;
BEGIN
    IF claim.outcome OPERATOR(pg_catalog.=) 'replay_success'::@extschema@.idem_outcome THEN
        doc := claim.response;
    ELSIF claim.outcome OPERATOR(pg_catalog.=) 'final_failure'::@extschema@.idem_outcome THEN
        IF claim.failure_code OPERATOR(pg_catalog.=) 'http_response'::pg_catalog.text THEN
            BEGIN
                doc := claim.failure_message::pg_catalog.jsonb;
            EXCEPTION WHEN data_exception THEN
                doc := NULL;
            END;
        END IF;
    ELSE
        RETURN NULL;
    END IF;
    IF COALESCE(pg_catalog.jsonb_typeof(doc OPERATOR(pg_catalog.->) 'status'::pg_catalog.text),
                ''::pg_catalog.text) OPERATOR(pg_catalog.=) 'number'::pg_catalog.text
       AND COALESCE(pg_catalog.jsonb_typeof(doc OPERATOR(pg_catalog.->) 'headers'::pg_catalog.text),
                    ''::pg_catalog.text) OPERATOR(pg_catalog.=) 'object'::pg_catalog.text
       AND COALESCE(pg_catalog.jsonb_typeof(doc OPERATOR(pg_catalog.->) 'body'::pg_catalog.text),
                    'null'::pg_catalog.text) OPERATOR(pg_catalog.=) ANY
           (ARRAY['string', 'null']::pg_catalog.text[]) THEN
        code := (doc OPERATOR(pg_catalog.->>) 'status'::pg_catalog.text)::pg_catalog.numeric;
    END IF;
    IF code IS NULL OR code OPERATOR(pg_catalog.<) 100::pg_catalog.numeric
       OR code OPERATOR(pg_catalog.>) 599::pg_catalog.numeric
       OR code OPERATOR(pg_catalog.<>) pg_catalog.trunc(code) THEN
        IF claim.outcome OPERATOR(pg_catalog.=) 'replay_success'::@extschema@.idem_outcome THEN
            -- Stored by something other than an HTTP adapter: send the JSON itself.
            RETURN pg_catalog.jsonb_build_object('status'::pg_catalog.text, 200::pg_catalog.int4,
                'headers'::pg_catalog.text,
                '{"content-type": "application/json"}'::pg_catalog.jsonb,
                'body'::pg_catalog.text, doc::pg_catalog.text);
        END IF;
        RETURN pg_catalog.jsonb_build_object('status'::pg_catalog.text, 500::pg_catalog.int4,
            'headers'::pg_catalog.text,
            '{"content-type": "application/problem+json"}'::pg_catalog.jsonb,
            'body'::pg_catalog.text,
            '{"type": "about:blank", "title": "Internal Server Error", "status": 500}'::pg_catalog.text);
    END IF;
    allowed := pg_catalog.array_cat(@extschema@.idem_http_headers(),
        ARRAY(SELECT pg_catalog.lower(k) FROM pg_catalog.unnest(keep) AS k WHERE k IS NOT NULL));
    FOR header IN SELECT e.key, e.value
                  FROM pg_catalog.jsonb_each(doc OPERATOR(pg_catalog.->) 'headers'::pg_catalog.text) AS e LOOP
        hname := pg_catalog.lower(header.key);
        CONTINUE WHEN NOT (hname OPERATOR(pg_catalog.=) ANY (allowed))
                   OR hname OPERATOR(pg_catalog.=) ANY (never)
                   OR pg_catalog.jsonb_typeof(header.value) OPERATOR(pg_catalog.<>) 'string'::pg_catalog.text
                   OR (header.value OPERATOR(pg_catalog.#>>) '{}'::pg_catalog.text[])
                      OPERATOR(pg_catalog.~) '[\r\n\x00]'::pg_catalog.text;
        kept := kept OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object(hname, header.value);
    END LOOP;
    RETURN pg_catalog.jsonb_build_object('status'::pg_catalog.text, code::pg_catalog.int4,
        'headers'::pg_catalog.text, kept,
        'body'::pg_catalog.text, doc OPERATOR(pg_catalog.->>) 'body'::pg_catalog.text);
END
$fn$;
COMMENT ON FUNCTION @extschema@.idem_http_replay(@extschema@.idem_claim_result, pg_catalog.text[]) IS
    'The response to send again for a claim that replays (replay_success, final_failure), its headers checked again; NULL for other outcomes';

-- 0.2.0: idem_distribute (Citus; sql/citus.sql).
-- idem_distribute: idempotency.requests as a Citus distributed table, and the hot functions
-- delegated to the worker that holds the key's shard (docs/scale-out.md). Without Citus it
-- raises P4060; the extension itself never depends on Citus (this body is only parsed, and
-- Citus's functions are looked up when it runs).
CREATE FUNCTION @extschema@.idem_distribute(
    "column" pg_catalog.text DEFAULT 'key',
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
    IF "column" IS NULL
       OR ("column" OPERATOR(pg_catalog.<>) 'key' AND "column" OPERATOR(pg_catalog.<>) 'scope') THEN
        RAISE EXCEPTION 'idem_distribute: column must be ''key'' or ''scope'', not %',
            COALESCE(pg_catalog.quote_literal("column"), 'NULL')
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
            "column", colocate_with => COALESCE(colocate_with, 'default'));
    ELSE
        PERFORM pg_catalog.create_distributed_table('idempotency.requests'::pg_catalog.regclass,
            "column", colocate_with => COALESCE(colocate_with, 'default'),
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
        PERFORM pg_catalog.create_distributed_function(fn, "column",
            colocate_with => 'idempotency.requests');
    END LOOP;
END
$fn$;
COMMENT ON FUNCTION @extschema@.idem_distribute(pg_catalog.text, pg_catalog.text, pg_catalog.int4) IS
    'Citus: distribute idempotency.requests by key or scope and delegate the hot functions to the shard''s worker';
REVOKE ALL ON FUNCTION @extschema@.idem_distribute(pg_catalog.text, pg_catalog.text, pg_catalog.int4) FROM PUBLIC;
