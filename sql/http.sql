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
