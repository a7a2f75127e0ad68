-- Derived from sql/upgrade/0.1.0--0.2.0.sql and sql/ by tests/layers/upgrade_script.rs: edit those.
-- idempotency 0.1.0 -> 0.2.0: what the upgrade script sql/idempotency--0.1.0--0.2.0.sql is
-- made from (docs/releasing.md). This file is written by hand; that one is derived from it:
-- the line `-- @functions` becomes every function of sql/ whose declaration differs from
-- sql/idempotency--0.1.0.sql's, as its file declares it (CREATE OR REPLACE), with the COMMENT,
-- REVOKE and GRANT statements that follow it there, and a line `-- @rest sql/<file>.sql` becomes
-- that file's other statements (for a file that is run again as it is, like sql/cdc_sign.sql).
-- tests/layers/upgrade_script.rs checks the derived file and writes it with IDEM_BLESS=1.
-- tests/integration/catalog/upgrade.rs proves the result: the upgraded catalog must equal a fresh install's, and every row must survive.
--
-- So a function is never typed here. What is: what only a person can decide.
--  - a new parameter with a DEFAULT (e.g. idem_claim's `wait interval DEFAULT NULL`): the
--    signature changes, so CREATE OR REPLACE cannot do it: DROP FUNCTION the old signature
--    above the line (no SQL object of the extension depends on it). A user's view or function
--    that calls the old signature blocks the DROP: say so in the release notes.
--  - a new column: ALTER TABLE idempotency.<table> ADD COLUMN ... at the END of the table in
--    the install script too (column order is compared), with the same DEFAULT/NOT NULL.
--  - a new table, constraint or index: as in its sql/ file, same names.
--  - a new enum label: ALTER TYPE @extschema@.<type> ADD VALUE ... (BEFORE/AFTER to match the
--    install script's order).
--  - grants to roles that exist already, and anything that needs the functions: below the line.
-- Like the install script, everything is schema-qualified (@extschema@ for the functions and
-- types, idempotency.* for the tables), and the tables are changed in place (ALTER), never
-- re-created: their rows are the users' data. Most of 0.2.0 is in the library: the functions
-- keep their C symbols, so the 0.1.0 definitions already call the new code.

-- ---- issue #13: idem_claim(..., wait interval DEFAULT NULL). The signature changes, so the
-- ---- 0.1.0 function is dropped (the new one is created below the line). A user's view or
-- ---- function that calls the old six-argument signature blocks the DROP.
DROP FUNCTION @extschema@.idem_claim(pg_catalog.text, pg_catalog.text, pg_catalog.text,
    pg_catalog.interval, pg_catalog.interval, pg_catalog.text);

-- ---- issue #32, finding 5: CDC message ids keyed by a per-database secret, and signed
-- ---- (a new table, as in sql/cdc.sql: tests/layers/upgrade_script.rs holds the two alike; its
-- ---- functions are below the line). Roles that may INSERT into the outbox get EXECUTE on the
-- ---- new functions, after them.
-- A per-database secret that only the tables' owner reads. pg_dump keeps it (extension
-- config), so a restore keeps the ids; the oldest row is the secret, so the row a restore's
-- CREATE EXTENSION makes loses to the restored one.
CREATE TABLE idempotency.cdc_secret (
    secret pg_catalog.bytea NOT NULL
        CONSTRAINT cdc_secret_length_check CHECK (pg_catalog.octet_length(secret) OPERATOR(pg_catalog.=) 32),
    created_at pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now()
);

REVOKE ALL ON idempotency.cdc_secret FROM PUBLIC;

-- 488 bits of gen_random_uuid() (pg_strong_random) hashed down to 32 bytes.
INSERT INTO idempotency.cdc_secret (secret)
SELECT pg_catalog.sha256(pg_catalog.uuid_send(pg_catalog.gen_random_uuid())
           OPERATOR(pg_catalog.||) pg_catalog.uuid_send(pg_catalog.gen_random_uuid())
           OPERATOR(pg_catalog.||) pg_catalog.uuid_send(pg_catalog.gen_random_uuid())
           OPERATOR(pg_catalog.||) pg_catalog.uuid_send(pg_catalog.gen_random_uuid()));

SELECT pg_catalog.pg_extension_config_dump('idempotency.cdc_secret', '');

-- ---- issue #32: the status comparisons of idempotency.requests' CHECKs and partial indexes,
-- ---- re-created as in sql/bootstrap.sql. CREATE EXTENSION runs with search_path set to the
-- ---- extension's schema, and 0.1.0 compared the enum with untyped literals: an
-- ---- `=(anyenum, text)` planted there before the install won, and every write ran it. The
-- ---- tables' other comparisons had exact matches in pg_catalog, which is searched first.
-- ---- Both rebuilds scan idempotency.requests under its ACCESS EXCLUSIVE lock. Before issue
-- ---- #25's UPDATE below, which would otherwise check the rows with the old CHECKs.
ALTER TABLE idempotency.requests
    DROP CONSTRAINT requests_lease_check,
    DROP CONSTRAINT requests_response_check,
    ADD CONSTRAINT requests_lease_check CHECK ((status OPERATOR(pg_catalog.=) 'processing'::@extschema@.idem_status)
                                          OPERATOR(pg_catalog.=) (locked_until IS NOT NULL)),
    ADD CONSTRAINT requests_response_check CHECK (status OPERATOR(pg_catalog.=) 'succeeded'::@extschema@.idem_status OR response IS NULL);

DROP INDEX idempotency.requests_lease_idx;

CREATE INDEX requests_lease_idx ON idempotency.requests (locked_until)
    WHERE status OPERATOR(pg_catalog.=) 'processing'::@extschema@.idem_status;

DROP INDEX idempotency.requests_expiry_idx;

CREATE INDEX requests_expiry_idx ON idempotency.requests (expires_at)
    WHERE status OPERATOR(pg_catalog.<>) 'processing'::@extschema@.idem_status;

-- ---- issue #25: lease and retention bounded to 100 years (requests_intervals_check, as in
-- ---- sql/bootstrap.sql), so that upkeep's now() + retention never leaves the timestamp range.
-- ---- Rows beyond the bound (only a hand-made UPDATE could store one) are clamped first.
UPDATE idempotency.requests
   SET lease = LEAST(lease, '100 years'::pg_catalog.interval),
       retention = LEAST(retention, '100 years'::pg_catalog.interval)
 WHERE lease OPERATOR(pg_catalog.>) '100 years'::pg_catalog.interval
    OR retention OPERATOR(pg_catalog.>) '100 years'::pg_catalog.interval;

ALTER TABLE idempotency.requests DROP CONSTRAINT requests_intervals_check,
    ADD CONSTRAINT requests_intervals_check CHECK (lease OPERATOR(pg_catalog.>) '0'::pg_catalog.interval
                                               AND lease OPERATOR(pg_catalog.<=) '100 years'::pg_catalog.interval
                                               AND retention OPERATOR(pg_catalog.>) '0'::pg_catalog.interval
                                               AND retention OPERATOR(pg_catalog.<=) '100 years'::pg_catalog.interval);

-- ==== Derived from sql/ (tests/layers/upgrade_script.rs): every function whose declaration
-- differs from sql/idempotency--0.1.0.sql's. Edit sql/, never this part.

-- sql/claim.sql
CREATE OR REPLACE FUNCTION @extschema@.idem_claim(
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

CREATE OR REPLACE FUNCTION idempotency.claim_policy_probe(
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

-- sql/canonical.sql
CREATE OR REPLACE FUNCTION @extschema@.idem_canonical(payload pg_catalog.jsonb)
RETURNS pg_catalog.text
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'idem_canonical_jsonb_wrapper';
COMMENT ON FUNCTION @extschema@.idem_canonical(pg_catalog.jsonb) IS
    'RFC 8785 canonical JSON text of the value';

CREATE OR REPLACE FUNCTION @extschema@.idem_canonical(payload pg_catalog.json)
RETURNS pg_catalog.text
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'idem_canonical_json_wrapper';
COMMENT ON FUNCTION @extschema@.idem_canonical(pg_catalog.json) IS
    'RFC 8785 canonical JSON text of the value (a duplicate member name is 22030)';

CREATE OR REPLACE FUNCTION @extschema@.idem_hash(payload pg_catalog.jsonb)
RETURNS pg_catalog.text
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'idem_hash_jsonb_wrapper';
COMMENT ON FUNCTION @extschema@.idem_hash(pg_catalog.jsonb) IS
    'Lowercase hex SHA-256 of the RFC 8785 canonical text: a request_hash for idem_claim';

CREATE OR REPLACE FUNCTION @extschema@.idem_hash(payload pg_catalog.json)
RETURNS pg_catalog.text
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'idem_hash_json_wrapper';
COMMENT ON FUNCTION @extschema@.idem_hash(pg_catalog.json) IS
    'Lowercase hex SHA-256 of the RFC 8785 canonical text: a request_hash for idem_claim';

CREATE OR REPLACE FUNCTION @extschema@.idem_hash(payload pg_catalog.jsonb, fields pg_catalog.text[])
RETURNS pg_catalog.text
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'idem_hash_jsonb_fields_wrapper';
COMMENT ON FUNCTION @extschema@.idem_hash(pg_catalog.jsonb, pg_catalog.text[]) IS
    'idem_hash of the object made of only the listed top-level members of payload';

CREATE OR REPLACE FUNCTION @extschema@.idem_lock_key(key pg_catalog.text)
RETURNS pg_catalog.int8
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'idem_lock_key_wrapper';
COMMENT ON FUNCTION @extschema@.idem_lock_key(pg_catalog.text) IS
    'idem_lock_key of (empty scope, key)';

CREATE OR REPLACE FUNCTION @extschema@.idem_lock_key(scope pg_catalog.text, key pg_catalog.text)
RETURNS pg_catalog.int8
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'idem_lock_key_scoped_wrapper';
COMMENT ON FUNCTION @extschema@.idem_lock_key(pg_catalog.text, pg_catalog.text) IS
    '64-bit key of (scope, key) for the application''s own advisory locks (XXH3-64 of the length-prefixed pair)';

-- sql/http.sql
CREATE OR REPLACE FUNCTION @extschema@.idem_http_headers()
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

CREATE OR REPLACE FUNCTION @extschema@.idem_http_response(
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
              OPERATOR(pg_catalog.~) E'[\\r\\n\\x00]'::pg_catalog.text THEN
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

CREATE OR REPLACE FUNCTION @extschema@.idem_http_fail(
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

CREATE OR REPLACE FUNCTION @extschema@.idem_http_replay(
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
                      OPERATOR(pg_catalog.~) E'[\\r\\n\\x00]'::pg_catalog.text;
        kept := kept OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object(hname, header.value);
    END LOOP;
    RETURN pg_catalog.jsonb_build_object('status'::pg_catalog.text, code::pg_catalog.int4,
        'headers'::pg_catalog.text, kept,
        'body'::pg_catalog.text, doc OPERATOR(pg_catalog.->>) 'body'::pg_catalog.text);
END
$fn$;
COMMENT ON FUNCTION @extschema@.idem_http_replay(@extschema@.idem_claim_result, pg_catalog.text[]) IS
    'The response to send again for a claim that replays (replay_success, final_failure), its headers checked again; NULL for other outcomes';

-- sql/inbox.sql
CREATE OR REPLACE FUNCTION @extschema@.idem_inbox_accept(
    consumer pg_catalog.text,
    message_id pg_catalog.text,
    message_hash pg_catalog.text,
    retention pg_catalog.interval DEFAULT '7 days'
) RETURNS pg_catalog.bool
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'idem_inbox_accept';
COMMENT ON FUNCTION @extschema@.idem_inbox_accept IS
    'true the first time a consumer sees a message (apply its effect in this transaction), false for a duplicate; P4050 if the id comes back with another hash';

-- sql/outbox.sql
CREATE OR REPLACE FUNCTION @extschema@.idem_outbox_put(
    topic pg_catalog.text,
    payload pg_catalog.jsonb,
    dedupe_key pg_catalog.text DEFAULT NULL,
    headers pg_catalog.jsonb DEFAULT NULL,
    available_at pg_catalog.timestamptz DEFAULT pg_catalog.now()
) RETURNS pg_catalog.int8
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'idem_outbox_put';
COMMENT ON FUNCTION @extschema@.idem_outbox_put IS
    'Enqueue a message in the caller''s transaction; returns its id (the existing one if dedupe_key was used for the topic)';

-- sql/maintenance.sql
CREATE OR REPLACE FUNCTION @extschema@.idem_reclaim(batch pg_catalog.int4 DEFAULT 10000)
RETURNS pg_catalog.int8
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'idem_reclaim_wrapper';
COMMENT ON FUNCTION @extschema@.idem_reclaim(pg_catalog.int4) IS
    'Processing records whose lease ended more than idempotency.reclaim_grace ago become failed_retryable (lease_expired); at most batch rows; returns how many';

CREATE OR REPLACE FUNCTION @extschema@.idem_purge(batch pg_catalog.int4 DEFAULT 10000)
RETURNS pg_catalog.int8
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'idem_purge_wrapper';
COMMENT ON FUNCTION @extschema@.idem_purge(pg_catalog.int4) IS
    'Deletes finished records past expires_at (never processing ones); at most batch rows; returns how many';

-- sql/metrics.sql
CREATE OR REPLACE FUNCTION @extschema@.idem_metrics()
RETURNS TABLE (name pg_catalog.text, value pg_catalog.int8)
LANGUAGE c VOLATILE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'idem_metrics_wrapper';
COMMENT ON FUNCTION @extschema@.idem_metrics() IS
    'Counters since server start: claims by outcome, hash mismatches, completions, failures, reclaimed and purged rows, maintenance rounds, records written directly or through SQL';
REVOKE ALL ON FUNCTION @extschema@.idem_metrics() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.idem_metrics() TO pg_monitor;

CREATE OR REPLACE FUNCTION @extschema@.idem_version()
RETURNS pg_catalog.text
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'idem_version_wrapper';

-- sql/citus.sql
CREATE OR REPLACE FUNCTION @extschema@.idem_distribute(
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
    -- Citus keeps no inheritance with its tables (docs/retention.md): a clear refusal rather
    -- than Citus's error part way.
    IF pg_catalog.to_regclass('idempotency.layout'::pg_catalog.text) IS NOT NULL THEN
        RAISE EXCEPTION 'idem_distribute: idempotency.requests is in the generations layout, which Citus cannot distribute'
            USING ERRCODE = '0A000',
                  HINT = 'SELECT idem_set_layout(''flat'') first (docs/retention.md).';
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

-- sql/layout.sql
CREATE OR REPLACE FUNCTION idempotency.layout_table(gen pg_catalog.int2, only_ pg_catalog.bool)
RETURNS pg_catalog.text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
SELECT CASE WHEN gen OPERATOR(pg_catalog.=) 0::pg_catalog.int2
            THEN CASE WHEN only_ THEN 'ONLY idempotency.requests' ELSE 'idempotency.requests' END
            ELSE 'idempotency.requests_g' OPERATOR(pg_catalog.||) gen::pg_catalog.text END
$fn$;

CREATE OR REPLACE FUNCTION idempotency.layout_truncated_since_snapshot()
RETURNS pg_catalog.bool
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
SELECT EXISTS (
    SELECT FROM pg_catalog.pg_class AS c
     WHERE (c.oid OPERATOR(pg_catalog.=) 'idempotency.requests'::pg_catalog.regclass
            OR c.oid OPERATOR(pg_catalog.=) ANY (SELECT i.inhrelid FROM pg_catalog.pg_inherits AS i
                 WHERE i.inhparent OPERATOR(pg_catalog.=) 'idempotency.requests'::pg_catalog.regclass))
       AND c.relfilenode OPERATOR(pg_catalog.<>) pg_catalog.pg_relation_filenode(c.oid::pg_catalog.regclass))
$fn$;

CREATE OR REPLACE FUNCTION idempotency.layout_columns()
RETURNS pg_catalog.text
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
SELECT pg_catalog.string_agg(pg_catalog.quote_ident(a.attname::pg_catalog.text), ', '::pg_catalog.text ORDER BY a.attnum)
  FROM pg_catalog.pg_attribute AS a
 WHERE a.attrelid OPERATOR(pg_catalog.=) 'idempotency.requests'::pg_catalog.regclass
   AND a.attnum OPERATOR(pg_catalog.>) 0::pg_catalog.int2 AND NOT a.attisdropped
   AND a.attgenerated OPERATOR(pg_catalog.=) ''::pg_catalog."char"
$fn$;

CREATE OR REPLACE FUNCTION idempotency.layout_claim_generation()
RETURNS pg_catalog.int2
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    gen pg_catalog.int2;
BEGIN
    -- From the catalog as it is now, not as this snapshot saw it.
    IF pg_catalog.to_regclass('idempotency.layout'::pg_catalog.text) IS NULL THEN
        RETURN NULL;
    END IF;
    SELECT l.current_generation INTO gen FROM idempotency.layout AS l;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '40001',
            MESSAGE = 'the layout of idempotency.requests changed after this transaction''s snapshot',
            HINT = 'Retry the transaction.';
    END IF;
    -- A READ COMMITTED statement sees every rotation committed before it (Postgres runs READ
    -- UNCOMMITTED as READ COMMITTED); a transaction snapshot may not.
    IF pg_catalog.current_setting('transaction_isolation'::pg_catalog.text)
       OPERATOR(pg_catalog.<>) ALL ('{read committed,read uncommitted}'::pg_catalog.text[])
       AND idempotency.layout_truncated_since_snapshot() THEN
        RAISE EXCEPTION USING ERRCODE = '40001',
            MESSAGE = 'idempotency.requests was rotated after this transaction''s snapshot',
            HINT = 'Retry the transaction.';
    END IF;
    -- The insert into a generation by name checks the generation's grants, which follow the
    -- table's at the next rotation step: the table's own INSERT right counts at once.
    IF NOT pg_catalog.has_table_privilege('idempotency.requests'::pg_catalog.regclass::pg_catalog.oid,
                                          'INSERT'::pg_catalog.text) THEN
        RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = 'permission denied for table requests',
            HINT = 'GRANT SELECT, INSERT, UPDATE, DELETE ON idempotency.requests TO the calling role.';
    END IF;
    -- Policies or triggers added after the switch would not apply to an insert into a
    -- generation by name: refused rather than bypassed.
    PERFORM idempotency.layout_refuse(idempotency.layout_refusal(true));
    RETURN gen;
END
$fn$;

CREATE OR REPLACE FUNCTION idempotency.layout_guard()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF TG_OP OPERATOR(pg_catalog.=) 'UPDATE'::pg_catalog.text
       AND (NEW.current_generation OPERATOR(pg_catalog.=) OLD.current_generation
            OR pg_catalog.current_setting('idempotency_layout.rotating'::pg_catalog.text, true)
               OPERATOR(pg_catalog.=) 'on'::pg_catalog.text) THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION USING ERRCODE = '55000',
        MESSAGE = 'only idem_rotate changes the current generation of idempotency.requests',
        HINT = 'Change generation_window, or go back to the flat layout: SELECT idem_set_layout(''flat'').';
END
$fn$;

CREATE OR REPLACE FUNCTION idempotency.layout_begin(what pg_catalog.text, lock_wait pg_catalog.interval)
RETURNS pg_catalog.text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF NOT pg_catalog.pg_has_role((SELECT c.relowner FROM pg_catalog.pg_class AS c
             WHERE c.oid OPERATOR(pg_catalog.=) 'idempotency.requests'::pg_catalog.regclass), 'USAGE') THEN
        RAISE EXCEPTION USING ERRCODE = '42501',
            MESSAGE = pg_catalog.format('permission denied to %s idempotency.requests'::pg_catalog.text, what),
            HINT = 'Run it as the owner of idempotency.requests.';
    END IF;
    IF lock_wait IS NULL OR lock_wait OPERATOR(pg_catalog.<=) '0'::pg_catalog.interval
       OR lock_wait OPERATOR(pg_catalog.>) '1 hour'::pg_catalog.interval THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'lock_wait must be longer than zero and at most 1 hour';
    END IF;
    RETURN pg_catalog.format('%sms', pg_catalog.ceil(pg_catalog.date_part('epoch'::pg_catalog.text, lock_wait)
                                     OPERATOR(pg_catalog.*) 1000::pg_catalog.float8));
END
$fn$;

CREATE OR REPLACE FUNCTION idempotency.layout_on_citus()
RETURNS pg_catalog.bool
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    found_ pg_catalog.bool;
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition'::pg_catalog.text) IS NULL THEN
        RETURN false;
    END IF;
    EXECUTE 'SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition AS d '
            'WHERE d.logicalrelid::pg_catalog.oid OPERATOR(pg_catalog.=) '
            '''idempotency.requests''::pg_catalog.regclass::pg_catalog.oid '
            'OR d.logicalrelid::pg_catalog.oid OPERATOR(pg_catalog.=) ANY (SELECT i.inhrelid '
            'FROM pg_catalog.pg_inherits AS i WHERE i.inhparent OPERATOR(pg_catalog.=) '
            '''idempotency.requests''::pg_catalog.regclass::pg_catalog.oid))'
        INTO found_;
    RETURN found_;
END
$fn$;

CREATE OR REPLACE FUNCTION idempotency.layout_refusal(children_ok pg_catalog.bool)
RETURNS pg_catalog.text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
SELECT CASE
    WHEN c.relrowsecurity OR EXISTS (SELECT FROM pg_catalog.pg_policy AS p WHERE p.polrelid OPERATOR(pg_catalog.=) c.oid)
        THEN 'idempotency.requests has row-level security'
    WHEN EXISTS (SELECT FROM pg_catalog.pg_trigger AS t
                  WHERE t.tgrelid OPERATOR(pg_catalog.=) c.oid AND NOT t.tgisinternal)
        THEN 'idempotency.requests has triggers'
    WHEN EXISTS (SELECT FROM pg_catalog.pg_inherits AS i
                   JOIN pg_catalog.pg_class AS g ON g.oid OPERATOR(pg_catalog.=) i.inhrelid
                  WHERE i.inhparent OPERATOR(pg_catalog.=) c.oid
                    AND (g.relrowsecurity
                         OR EXISTS (SELECT FROM pg_catalog.pg_trigger AS t
                                     WHERE t.tgrelid OPERATOR(pg_catalog.=) g.oid AND NOT t.tgisinternal)
                         OR EXISTS (SELECT FROM pg_catalog.pg_constraint AS k
                                     WHERE k.confrelid OPERATOR(pg_catalog.=) g.oid)))
        THEN 'a generation of idempotency.requests has row-level security, triggers or a foreign key to it'
    -- LIKE does not copy a foreign key onto the generations; one that refers to the table
    -- sees only its own rows; and the rotation's TRUNCATE of those rows fails on either.
    WHEN EXISTS (SELECT FROM pg_catalog.pg_constraint AS k
                  WHERE k.contype OPERATOR(pg_catalog.=) 'f'::pg_catalog."char"
                    AND (k.conrelid OPERATOR(pg_catalog.=) c.oid OR k.confrelid OPERATOR(pg_catalog.=) c.oid))
        THEN 'idempotency.requests has a foreign key, or one refers to it'
    -- Each generation would draw from a sequence of its own (LIKE copies the identity).
    WHEN EXISTS (SELECT FROM pg_catalog.pg_attribute AS a
                  WHERE a.attrelid OPERATOR(pg_catalog.=) c.oid AND NOT a.attisdropped
                    AND a.attidentity OPERATOR(pg_catalog.<>) ''::pg_catalog."char")
        THEN 'idempotency.requests has an identity column'
    -- A claim inserts into a generation with a bare ON CONFLICT DO NOTHING, which would also
    -- swallow another unique index's or an exclusion constraint's violation.
    WHEN EXISTS (SELECT FROM pg_catalog.pg_index AS x
                  WHERE (x.indrelid OPERATOR(pg_catalog.=) c.oid
                         OR x.indrelid OPERATOR(pg_catalog.=) ANY (SELECT i.inhrelid FROM pg_catalog.pg_inherits AS i
                                WHERE i.inhparent OPERATOR(pg_catalog.=) c.oid))
                    AND (x.indisunique OR x.indisexclusion) AND NOT x.indisprimary)
        THEN 'idempotency.requests or a generation has a unique index or an exclusion constraint besides its primary key'
    WHEN idempotency.layout_on_citus()
        THEN 'idempotency.requests is a Citus table'
    WHEN NOT children_ok AND EXISTS (SELECT FROM pg_catalog.pg_inherits AS i
                                      WHERE i.inhparent OPERATOR(pg_catalog.=) c.oid)
        THEN 'idempotency.requests has child tables'
END
  FROM pg_catalog.pg_class AS c
 WHERE c.oid OPERATOR(pg_catalog.=) 'idempotency.requests'::pg_catalog.regclass
$fn$;

CREATE OR REPLACE FUNCTION idempotency.layout_refuse(why pg_catalog.text)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF why IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = '0A000',
            MESSAGE = pg_catalog.format('the generations layout does not support this yet: %s', why),
            HINT = 'Remove it, or go back to the flat layout: SELECT idem_set_layout(''flat'').';
    END IF;
END
$fn$;

CREATE OR REPLACE FUNCTION idempotency.layout_switch(kind pg_catalog.text)
RETURNS pg_catalog.text
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    cols pg_catalog.text;
    managed pg_catalog.text;
BEGIN
    IF kind IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'kind must not be null';
    END IF;
    IF kind OPERATOR(pg_catalog.<>) ALL ('{flat,generations}'::pg_catalog.text[]) THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = pg_catalog.format('unknown layout %s', pg_catalog.quote_literal(kind)),
            HINT = 'The layouts are flat and generations.';
    END IF;
    LOCK TABLE ONLY idempotency.requests IN ACCESS EXCLUSIVE MODE;
    IF (pg_catalog.to_regclass('idempotency.layout'::pg_catalog.text) IS NOT NULL)
       OPERATOR(pg_catalog.=) (kind OPERATOR(pg_catalog.=) 'generations'::pg_catalog.text) THEN
        RETURN kind;
    END IF;

    IF kind OPERATOR(pg_catalog.=) 'flat'::pg_catalog.text THEN
        LOCK TABLE idempotency.layout, idempotency.requests_g1, idempotency.requests_g2, idempotency.requests_g3
            IN ACCESS EXCLUSIVE MODE;
        -- Read under the locks, which an ALTER TABLE of the columns waits for.
        cols := idempotency.layout_columns();
        FOR gen IN 1..3 LOOP
            EXECUTE pg_catalog.format('INSERT INTO idempotency.requests (%1$s) SELECT %1$s FROM %2$s AS r '
                'WHERE r.status OPERATOR(pg_catalog.=) $1 OR r.expires_at OPERATOR(pg_catalog.>=) pg_catalog.now()',
                cols, idempotency.layout_table(gen::pg_catalog.int2, true))
                USING 'processing'::@extschema@.idem_status;
        END LOOP;
        DROP TABLE idempotency.requests_g1, idempotency.requests_g2, idempotency.requests_g3, idempotency.layout;
        RETURN kind;
    END IF;

    PERFORM idempotency.layout_refuse(idempotency.layout_refusal(false));
    -- With citus.use_citus_managed_tables on, Citus would take each new table into its
    -- metadata as it is created, then refuse the inheritance: not for these (nor the layout
    -- row's table).
    managed := pg_catalog.current_setting('citus.use_citus_managed_tables'::pg_catalog.text, true);
    IF managed IS NOT NULL THEN
        PERFORM pg_catalog.set_config('citus.use_citus_managed_tables'::pg_catalog.text, 'off'::pg_catalog.text, true);
    END IF;
    CREATE TABLE idempotency.requests_g1 (LIKE idempotency.requests INCLUDING ALL);
    ALTER TABLE idempotency.requests_g1 INHERIT idempotency.requests;
    CREATE TABLE idempotency.requests_g2 (LIKE idempotency.requests INCLUDING ALL);
    ALTER TABLE idempotency.requests_g2 INHERIT idempotency.requests;
    CREATE TABLE idempotency.requests_g3 (LIKE idempotency.requests INCLUDING ALL);
    ALTER TABLE idempotency.requests_g3 INHERIT idempotency.requests;
    COMMENT ON TABLE idempotency.requests_g1 IS 'Generation 1 of idempotency.requests (idem_set_layout)';
    COMMENT ON TABLE idempotency.requests_g2 IS 'Generation 2 of idempotency.requests (idem_set_layout)';
    COMMENT ON TABLE idempotency.requests_g3 IS 'Generation 3 of idempotency.requests (idem_set_layout)';
    CREATE TABLE idempotency.layout (
        one                pg_catalog.bool        PRIMARY KEY DEFAULT true CHECK (one),
        current_generation pg_catalog.int2        NOT NULL DEFAULT 1
            CHECK (current_generation OPERATOR(pg_catalog.>=) 1::pg_catalog.int2
                   AND current_generation OPERATOR(pg_catalog.<=) 3::pg_catalog.int2),
        switched_at        pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now(),
        generation_window  pg_catalog.interval    NOT NULL DEFAULT '1 day'::pg_catalog.interval
            CHECK (generation_window OPERATOR(pg_catalog.>) '0'::pg_catalog.interval)
    );
    INSERT INTO idempotency.layout (one) VALUES (true);
    CREATE TRIGGER layout_guard BEFORE UPDATE OR DELETE ON idempotency.layout
        FOR EACH ROW EXECUTE FUNCTION idempotency.layout_guard();
    CREATE TRIGGER layout_guard_truncate BEFORE TRUNCATE ON idempotency.layout
        FOR EACH STATEMENT EXECUTE FUNCTION idempotency.layout_guard();
    COMMENT ON TABLE idempotency.layout IS
        'The generations layout of idempotency.requests: the current generation (1 to 3), for claims and idem_rotate';
    -- Every claim of a new key reads it; it holds nothing secret.
    GRANT SELECT ON idempotency.layout TO PUBLIC;
    -- The table's owner owns them (the worker works as that role), whoever switched.
    EXECUTE pg_catalog.format('ALTER TABLE idempotency.requests_g1 OWNER TO %1$s; '
        'ALTER TABLE idempotency.requests_g2 OWNER TO %1$s; ALTER TABLE idempotency.requests_g3 OWNER TO %1$s; '
        'ALTER TABLE idempotency.layout OWNER TO %1$s',
        (SELECT c.relowner::pg_catalog.regrole FROM pg_catalog.pg_class AS c
          WHERE c.oid OPERATOR(pg_catalog.=) 'idempotency.requests'::pg_catalog.regclass));
    IF managed IS NOT NULL THEN
        PERFORM pg_catalog.set_config('citus.use_citus_managed_tables'::pg_catalog.text, managed, true);
    END IF;
    PERFORM idempotency.layout_sync_grants();
    RETURN kind;
END
$fn$;

CREATE OR REPLACE FUNCTION idempotency.layout_bounded(lock_wait pg_catalog.interval, what pg_catalog.text,
    step pg_catalog.text, kind pg_catalog.text, force pg_catalog.bool, batch pg_catalog.int4)
RETURNS pg_catalog.text
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    prev constant pg_catalog.text := pg_catalog.current_setting('lock_timeout'::pg_catalog.text);
    done pg_catalog.text;
BEGIN
    IF step IS NULL OR step OPERATOR(pg_catalog.<>) ALL ('{switch,rotate}'::pg_catalog.text[]) THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'step must be switch or rotate';
    END IF;
    PERFORM pg_catalog.set_config('lock_timeout'::pg_catalog.text, idempotency.layout_begin(what, lock_wait), true);
    IF step OPERATOR(pg_catalog.=) 'switch'::pg_catalog.text THEN
        done := idempotency.layout_switch(kind);
    ELSE
        done := idempotency.layout_rotate(force, batch);
    END IF;
    PERFORM pg_catalog.set_config('lock_timeout'::pg_catalog.text, prev, true);
    RETURN done;
END
$fn$;

CREATE OR REPLACE FUNCTION @extschema@.idem_set_layout(kind pg_catalog.text, lock_wait pg_catalog.interval DEFAULT '5s')
RETURNS pg_catalog.text
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN idempotency.layout_bounded(lock_wait, 'change the layout of'::pg_catalog.text,
        'switch'::pg_catalog.text, kind, NULL::pg_catalog.bool, NULL::pg_catalog.int4);
END
$fn$;
COMMENT ON FUNCTION @extschema@.idem_set_layout(pg_catalog.text, pg_catalog.interval) IS
    'Switch idempotency.requests between the flat and the generations layout; returns the layout';

-- sql/rotate.sql
CREATE OR REPLACE FUNCTION idempotency.layout_sync_grants()
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    child pg_catalog.regclass;
    who pg_catalog.text;
    inserters pg_catalog.text[];
    holders pg_catalog.text[];
    want pg_catalog.text;
    have pg_catalog.text;
BEGIN
    IF pg_catalog.to_regclass('idempotency.layout'::pg_catalog.text) IS NULL THEN
        RETURN;
    END IF;
    -- Two syncs at once would both rewrite a generation's pg_class row ("tuple concurrently
    -- updated"): a rotation step holds this lock already.
    PERFORM FROM idempotency.layout AS l FOR NO KEY UPDATE;
    -- The roles but the owner with INSERT on the table, as GRANT names them; and what a
    -- generation that grants them that and nothing else reads as below.
    SELECT pg_catalog.array_agg(DISTINCT CASE WHEN x.grantee OPERATOR(pg_catalog.=) 0::pg_catalog.oid
                                              THEN 'PUBLIC'::pg_catalog.text
                                              ELSE x.grantee::pg_catalog.regrole::pg_catalog.text END)
      INTO inserters
      FROM pg_catalog.pg_class AS c, pg_catalog.aclexplode(c.relacl) AS x
     WHERE c.oid OPERATOR(pg_catalog.=) 'idempotency.requests'::pg_catalog.regclass
       AND x.grantee OPERATOR(pg_catalog.<>) c.relowner
       AND x.privilege_type OPERATOR(pg_catalog.=) 'INSERT'::pg_catalog.text;
    SELECT pg_catalog.string_agg(w.e, ',' ORDER BY w.e) INTO want FROM (
        SELECT pg_catalog.concat_ws('|'::pg_catalog.text, ''::pg_catalog.text, r, 'INSERT'::pg_catalog.text) AS e
          FROM pg_catalog.unnest(inserters) AS r) AS w;
    FOR child IN SELECT i.inhrelid::pg_catalog.regclass FROM pg_catalog.pg_inherits AS i
                  WHERE i.inhparent OPERATOR(pg_catalog.=) 'idempotency.requests'::pg_catalog.regclass LOOP
        -- Who the generation grants anything now (on it or a column), and what, in that form
        -- (a grant option, a column grant: a difference).
        SELECT pg_catalog.array_agg(DISTINCT h.who), pg_catalog.string_agg(DISTINCT h.e, ',' ORDER BY h.e)
          INTO holders, have FROM (
            SELECT g.who, pg_catalog.concat_ws('|'::pg_catalog.text, a.col, g.who, a.privilege_type,
                       CASE WHEN a.is_grantable THEN 'grantable'::pg_catalog.text END) AS e
              FROM (SELECT ''::pg_catalog.text AS col, x.grantee, x.privilege_type, x.is_grantable
                      FROM pg_catalog.pg_class AS c, pg_catalog.aclexplode(c.relacl) AS x
                     WHERE c.oid OPERATOR(pg_catalog.=) child AND x.grantee OPERATOR(pg_catalog.<>) c.relowner
                    UNION ALL
                    SELECT t.attname::pg_catalog.text, x.grantee, x.privilege_type, x.is_grantable
                      FROM pg_catalog.pg_class AS c, pg_catalog.pg_attribute AS t, pg_catalog.aclexplode(t.attacl) AS x
                     WHERE c.oid OPERATOR(pg_catalog.=) child AND t.attrelid OPERATOR(pg_catalog.=) child
                       AND t.attnum OPERATOR(pg_catalog.>) 0::pg_catalog.int2 AND NOT t.attisdropped
                       AND x.grantee OPERATOR(pg_catalog.<>) c.relowner) AS a,
                   LATERAL (SELECT CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0::pg_catalog.oid
                                        THEN 'PUBLIC'::pg_catalog.text
                                        ELSE a.grantee::pg_catalog.regrole::pg_catalog.text END AS who) AS g) AS h;
        IF have IS NOT DISTINCT FROM want THEN
            CONTINUE;
        END IF;
        -- CASCADE: only the owner grants here now, but a grant option given before may have
        -- been passed on.
        FOREACH who IN ARRAY COALESCE(holders, '{}'::pg_catalog.text[]) LOOP
            EXECUTE pg_catalog.format('REVOKE ALL ON %s FROM %s CASCADE', child, who);
        END LOOP;
        FOREACH who IN ARRAY COALESCE(inserters, '{}'::pg_catalog.text[]) LOOP
            EXECUTE pg_catalog.format('GRANT INSERT ON %s TO %s', child, who);
        END LOOP;
    END LOOP;
END
$fn$;

CREATE OR REPLACE FUNCTION idempotency.layout_rotate(force pg_catalog.bool, batch pg_catalog.int4)
RETURNS pg_catalog.text
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    lay record;
    oldest pg_catalog.int2;
    survivor record;
    moved pg_catalog.int8 := 0;
    n pg_catalog.int8;
    left_ pg_catalog.bool;
    cols pg_catalog.text;
BEGIN
    IF force IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'force must not be null';
    END IF;
    IF batch IS NULL OR batch OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'batch must be at least 1';
    END IF;
    IF pg_catalog.to_regclass('idempotency.layout'::pg_catalog.text) IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '55000', MESSAGE = 'idempotency.requests is not in the generations layout',
            HINT = 'SELECT idem_set_layout(''generations'') first.';
    END IF;
    -- One rotation at a time.
    BEGIN
        SELECT * INTO lay FROM idempotency.layout AS l FOR NO KEY UPDATE NOWAIT;
        -- Decided under the tables' locks, which a CREATE TRIGGER or CREATE POLICY still open
        -- elsewhere holds until it commits: what it adds is refused, never run.
        LOCK TABLE ONLY idempotency.requests, idempotency.requests_g1, idempotency.requests_g2,
            idempotency.requests_g3 IN ROW EXCLUSIVE MODE;
    EXCEPTION WHEN lock_not_available THEN
        RETURN 'busy';
    END;
    PERFORM idempotency.layout_refuse(idempotency.layout_refusal(true));
    -- Every step, so that a grant changed on the table by hand reaches the generations
    -- within one round of the upkeep (sql/layout.sql).
    PERFORM idempotency.layout_sync_grants();
    IF NOT force AND pg_catalog.now() OPERATOR(pg_catalog.<) (lay.switched_at OPERATOR(pg_catalog.+) lay.generation_window) THEN
        RETURN 'idle';
    END IF;
    -- The table's own rows (from before the switch) go first, once; then the generations in turn.
    IF EXISTS (SELECT FROM ONLY idempotency.requests AS r) THEN
        oldest := 0;
    ELSE
        oldest := (lay.current_generation OPERATOR(pg_catalog.%) 3::pg_catalog.int2) OPERATOR(pg_catalog.+) 1::pg_catalog.int2;
    END IF;
    -- Survivors move under their row lock, taken without waiting (a record someone is changing
    -- waits for the next round). No claim inserts a key that has a record, and none inserts
    -- into this generation any more: the switch that made it old waited for every claim past
    -- its look.
    -- Each branch has a partial index (processing: the lease index; finished: the expiry one).
    FOR survivor IN EXECUTE pg_catalog.format(
        'SELECT r.scope, r.key FROM %1$s AS r WHERE r.status OPERATOR(pg_catalog.=) $1 '
        'UNION ALL SELECT r.scope, r.key FROM %1$s AS r WHERE r.status OPERATOR(pg_catalog.<>) $1 '
        'AND r.expires_at OPERATOR(pg_catalog.>=) pg_catalog.now() LIMIT $2', idempotency.layout_table(oldest, true))
        USING 'processing'::@extschema@.idem_status, batch LOOP
        -- Read once the survivor pass holds the oldest generation's lock, which an ALTER TABLE
        -- of the columns waits for.
        IF cols IS NULL THEN
            cols := idempotency.layout_columns();
        END IF;
        EXECUTE pg_catalog.format(
            'WITH gone AS (DELETE FROM %1$s AS r WHERE r.ctid OPERATOR(pg_catalog.=) (SELECT q.ctid FROM %1$s AS q '
            'WHERE q.scope OPERATOR(pg_catalog.=) $1 AND q.key OPERATOR(pg_catalog.=) $2 FOR UPDATE SKIP LOCKED) '
            'RETURNING %3$s) INSERT INTO %2$s (%3$s) SELECT %3$s FROM gone',
            idempotency.layout_table(oldest, true), idempotency.layout_table(lay.current_generation, false), cols)
            USING survivor.scope, survivor.key;
        GET DIAGNOSTICS n = ROW_COUNT;
        moved := moved OPERATOR(pg_catalog.+) n;
    END LOOP;
    IF moved OPERATOR(pg_catalog.>) 0 THEN
        RETURN pg_catalog.format('moved %s', moved);
    END IF;
    -- The check that counts is the one under the lock: nothing can revive a record after it.
    BEGIN
        EXECUTE pg_catalog.format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', idempotency.layout_table(oldest, true));
    EXCEPTION WHEN lock_not_available THEN
        RETURN 'busy';
    END;
    -- Under the lock every claim waits for: two index probes, no scan.
    EXECUTE pg_catalog.format('SELECT EXISTS (SELECT FROM %1$s AS r WHERE r.status OPERATOR(pg_catalog.=) $1) '
        'OR EXISTS (SELECT FROM %1$s AS r WHERE r.status OPERATOR(pg_catalog.<>) $1 '
        'AND r.expires_at OPERATOR(pg_catalog.>=) pg_catalog.now())', idempotency.layout_table(oldest, true))
        INTO left_ USING 'processing'::@extschema@.idem_status;
    IF left_ THEN
        RETURN 'moved 0';
    END IF;
    EXECUTE pg_catalog.format('TRUNCATE %s', idempotency.layout_table(oldest, true));
    IF oldest OPERATOR(pg_catalog.=) 0::pg_catalog.int2 THEN
        RETURN 'emptied';
    END IF;
    PERFORM pg_catalog.set_config('idempotency_layout.rotating'::pg_catalog.text, 'on'::pg_catalog.text, true);
    UPDATE idempotency.layout AS l SET current_generation = oldest, switched_at = pg_catalog.now();
    PERFORM pg_catalog.set_config('idempotency_layout.rotating'::pg_catalog.text, ''::pg_catalog.text, true);
    RETURN 'switched';
END
$fn$;

CREATE OR REPLACE FUNCTION @extschema@.idem_rotate(force pg_catalog.bool DEFAULT false,
    lock_wait pg_catalog.interval DEFAULT '100ms', batch pg_catalog.int4 DEFAULT 1000)
RETURNS pg_catalog.text
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN idempotency.layout_bounded(lock_wait, 'rotate'::pg_catalog.text, 'rotate'::pg_catalog.text,
        NULL::pg_catalog.text, force, batch);
END
$fn$;
COMMENT ON FUNCTION @extschema@.idem_rotate(pg_catalog.bool, pg_catalog.interval, pg_catalog.int4) IS
    'One step of the generations layout''s rotation: moved N, busy, switched, emptied or idle';

-- sql/cdc_sign.sql
CREATE OR REPLACE FUNCTION idempotency.cdc_hmac(key pg_catalog.bytea, message pg_catalog.bytea)
RETURNS pg_catalog.bytea
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'cdc_hmac_wrapper';

CREATE OR REPLACE FUNCTION idempotency.cdc_sign(message pg_catalog.bytea)
RETURNS pg_catalog.bytea
LANGUAGE c STABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'cdc_sign_wrapper';
REVOKE ALL ON FUNCTION idempotency.cdc_sign(pg_catalog.bytea) FROM PUBLIC;

CREATE OR REPLACE FUNCTION idempotency.outbox_put_check(
    topic pg_catalog.text,
    payload pg_catalog.jsonb,
    dedupe_key pg_catalog.text,
    headers pg_catalog.jsonb
) RETURNS void
LANGUAGE c STABLE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'outbox_put_check_wrapper';

CREATE OR REPLACE FUNCTION idempotency.cdc_message(
    topic pg_catalog.text,
    dedupe_key pg_catalog.text,
    payload pg_catalog.jsonb,
    headers pg_catalog.jsonb
) RETURNS pg_catalog.text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    id_ pg_catalog.uuid;
    doc pg_catalog.jsonb;
    sig pg_catalog.bytea;
BEGIN
    IF (SELECT c.relrowsecurity FROM pg_catalog.pg_class AS c
         WHERE c.oid OPERATOR(pg_catalog.=) 'idempotency.outbox'::pg_catalog.regclass) THEN
        RAISE EXCEPTION USING ERRCODE = '0A000',
            MESSAGE = 'idempotency.outbox_delivery = cdc_message cannot apply idempotency.outbox''s row-level security policies',
            HINT = 'Use idempotency.outbox_delivery = cdc_table: its rows are checked by the policies.';
    END IF;
    PERFORM idempotency.outbox_put_check(topic, payload, dedupe_key, headers);
    id_ := CASE WHEN dedupe_key IS NULL THEN pg_catalog.gen_random_uuid()
        ELSE pg_catalog.substr(pg_catalog.encode(idempotency.cdc_sign(
                 pg_catalog.convert_to(topic, 'UTF8'::pg_catalog.name) OPERATOR(pg_catalog.||) pg_catalog.decode('00'::pg_catalog.text, 'hex'::pg_catalog.text)
                 OPERATOR(pg_catalog.||) pg_catalog.convert_to(dedupe_key, 'UTF8'::pg_catalog.name)),
             'hex'::pg_catalog.text), 1, 32)::pg_catalog.uuid END;
    doc := pg_catalog.jsonb_build_object(
        'message_id'::pg_catalog.text, id_,
        'topic'::pg_catalog.text, topic, 'dedupe_key'::pg_catalog.text, dedupe_key,
        'payload'::pg_catalog.text, payload, 'headers'::pg_catalog.text, headers,
        'created_at'::pg_catalog.text, pg_catalog.now());
    sig := idempotency.cdc_sign(pg_catalog.convert_to(doc::pg_catalog.text, 'UTF8'::pg_catalog.name));
    IF id_ IS NULL OR sig IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '55000', MESSAGE = 'idempotency.cdc_secret holds no secret',
            HINT = 'Restore its row from a dump, or have the tables'' owner insert 32 new random bytes (message ids change).';
    END IF;
    RETURN (doc OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object('signature'::pg_catalog.text,
        pg_catalog.encode(sig, 'hex'::pg_catalog.text)))::pg_catalog.text;
END
$fn$;
REVOKE ALL ON FUNCTION idempotency.cdc_message(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.jsonb) FROM PUBLIC;
COMMENT ON FUNCTION idempotency.cdc_message(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.jsonb) IS
    'Internal: the signed content of a cdc_message put, its message_id keyed by this database''s secret';

CREATE OR REPLACE FUNCTION @extschema@.idem_cdc_verify(message pg_catalog.jsonb)
RETURNS pg_catalog.bool
LANGUAGE plpgsql STABLE STRICT SECURITY DEFINER PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    sig pg_catalog.text;
BEGIN
    IF pg_catalog.jsonb_typeof(message) OPERATOR(pg_catalog.<>) 'object'::pg_catalog.text THEN
        RETURN false;
    END IF;
    sig := message OPERATOR(pg_catalog.->>) 'signature'::pg_catalog.text;
    IF sig IS NULL OR sig OPERATOR(pg_catalog.!~) '^[0-9a-f]{64}$'::pg_catalog.text THEN
        RETURN false;
    END IF;
    -- Compared through SHA-256, so that the comparison's time says nothing of the HMAC; no
    -- secret: NULL, false.
    RETURN COALESCE(pg_catalog.sha256(idempotency.cdc_sign(pg_catalog.convert_to(
               (message OPERATOR(pg_catalog.-) 'signature'::pg_catalog.text)::pg_catalog.text, 'UTF8'::pg_catalog.name)))
           OPERATOR(pg_catalog.=) pg_catalog.sha256(pg_catalog.decode(sig, 'hex'::pg_catalog.text)), false);
END
$fn$;
REVOKE ALL ON FUNCTION @extschema@.idem_cdc_verify(pg_catalog.jsonb) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.idem_cdc_verify(pg_catalog.jsonb) IS
    'true when a cdc_message put''s content carries this database''s signature: drop a message for which it is false before idem_inbox_accept';

CREATE OR REPLACE FUNCTION @extschema@.idem_cdc_verified(message pg_catalog.text)
RETURNS pg_catalog.jsonb
LANGUAGE plpgsql STABLE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    doc pg_catalog.jsonb;
BEGIN
    BEGIN
        doc := message::pg_catalog.jsonb;
    EXCEPTION WHEN data_exception OR program_limit_exceeded THEN
        RETURN NULL;
    END;
    IF @extschema@.idem_cdc_verify(doc) THEN
        RETURN doc;
    END IF;
    RETURN NULL;
END
$fn$;
REVOKE ALL ON FUNCTION @extschema@.idem_cdc_verified(pg_catalog.text) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.idem_cdc_verified(pg_catalog.text) IS
    'A cdc_message put''s content parsed when it carries this database''s signature, NULL otherwise (not JSON included): what a consumer applies';

-- sql/grants.sql
CREATE OR REPLACE FUNCTION @extschema@.idem_grant_statements(profile pg_catalog.text)
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

CREATE OR REPLACE FUNCTION @extschema@.idem_grant(role pg_catalog.regrole, profile pg_catalog.text)
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

CREATE OR REPLACE FUNCTION @extschema@.idem_revoke(role pg_catalog.regrole, profile pg_catalog.text)
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
-- ==== End of the derived part.

-- ---- After the functions: what needs them.

-- ==== Derived: the rest of sql/cdc_sign.sql, run again.
-- Whoever may already put into the outbox keeps putting cdc_message and verifying after an
-- update (a fresh install has no such role yet).
DO $grant$
DECLARE
    r pg_catalog.regrole;
BEGIN
    FOR r IN SELECT DISTINCT a.grantee::pg_catalog.regrole
               FROM pg_catalog.pg_class AS c, pg_catalog.aclexplode(c.relacl) AS a
              WHERE c.oid OPERATOR(pg_catalog.=) 'idempotency.outbox'::pg_catalog.regclass
                AND a.privilege_type OPERATOR(pg_catalog.=) 'INSERT'::pg_catalog.text
                AND a.grantee OPERATOR(pg_catalog.<>) 0::pg_catalog.oid
                AND a.grantee OPERATOR(pg_catalog.<>) c.relowner LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION idempotency.cdc_message(pg_catalog.text, pg_catalog.text, '
            'pg_catalog.jsonb, pg_catalog.jsonb), @extschema@.idem_cdc_verify(pg_catalog.jsonb), '
            '@extschema@.idem_cdc_verified(pg_catalog.text) TO %s', r);
    END LOOP;
END
$grant$;

-- The definer functions belong to the secret's owner, the tables' owner, even when another
-- role (a superuser's portable.sh --update) created them.
DO $owner$
DECLARE
    owner_ constant pg_catalog.regrole := (SELECT c.relowner::pg_catalog.regrole FROM pg_catalog.pg_class AS c
                                           WHERE c.oid OPERATOR(pg_catalog.=) 'idempotency.cdc_secret'::pg_catalog.regclass);
BEGIN
    EXECUTE pg_catalog.format('ALTER FUNCTION idempotency.cdc_message(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, '
        'pg_catalog.jsonb) OWNER TO %s', owner_);
    EXECUTE pg_catalog.format('ALTER FUNCTION @extschema@.idem_cdc_verify(pg_catalog.jsonb) OWNER TO %s', owner_);
END
$owner$;

-- Only the owner reads the secret or writes it: row-level security with no policy binds every
-- other role (pg_read_all_data and pg_write_all_data too; the owner is exempt without FORCE),
-- and no grant survives, not even one from default privileges. Run at install and update.
DO $lock$
DECLARE
    r pg_catalog.regrole;
BEGIN
    IF (SELECT c.relkind FROM pg_catalog.pg_class AS c
         WHERE c.oid OPERATOR(pg_catalog.=) 'idempotency.cdc_secret'::pg_catalog.regclass)
       OPERATOR(pg_catalog.<>) 'r'::pg_catalog."char" THEN
        RETURN;
    END IF;
    ALTER TABLE idempotency.cdc_secret ENABLE ROW LEVEL SECURITY;
    REVOKE ALL ON idempotency.cdc_secret FROM PUBLIC;
    FOR r IN SELECT DISTINCT a.grantee::pg_catalog.regrole
               FROM pg_catalog.pg_class AS c, pg_catalog.aclexplode(c.relacl) AS a
              WHERE c.oid OPERATOR(pg_catalog.=) 'idempotency.cdc_secret'::pg_catalog.regclass
                AND a.grantee OPERATOR(pg_catalog.<>) 0::pg_catalog.oid
                AND a.grantee OPERATOR(pg_catalog.<>) c.relowner LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON idempotency.cdc_secret FROM %s', r);
    END LOOP;
END
$lock$;

-- ---- issue #25: warn when the extension's schema is writable by others, as sql/grants.sql
-- ---- does at the end of an install.
-- ==== Derived: the rest of sql/grants.sql, run again.
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

-- ---- issue #24: the generations layout's steps, the table owner's alone.
-- ==== Derived: the rest of sql/layout.sql, run again.
-- The steps are the table owner's, through idem_set_layout and idem_rotate (Postgres's own
-- privilege checks would refuse anyone else part way; these say no at the door).
REVOKE ALL ON FUNCTION idempotency.layout_switch(pg_catalog.text) FROM PUBLIC;

-- ==== Derived: the rest of sql/rotate.sql, run again.
-- A step of idem_rotate, the table owner's (layout_bounded checks it at the door).
REVOKE ALL ON FUNCTION idempotency.layout_rotate(pg_catalog.bool, pg_catalog.int4) FROM PUBLIC;

REVOKE ALL ON FUNCTION idempotency.layout_sync_grants() FROM PUBLIC;
