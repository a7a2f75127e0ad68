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
