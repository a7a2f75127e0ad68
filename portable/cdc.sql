-- HMAC-SHA256 (RFC 2104) in SQL, for sql/cdc.sql's CDC message ids and signatures: the native
-- edition's is Rust (src/entry/outbox_cdc.rs); both must give the same bytes (RFC 4231 vectors,
-- tests/integration/consumers/outbox_cdc/forged.rs). Built-ins only: sha256 and get_byte.
-- The body of cdc_hmac (sql/cdc_sign.sql declares it).
BODY cdc_hmac_wrapper LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $fn$
WITH k AS (
    -- A key longer than the block (64 bytes) is hashed first, then zero-padded to the block.
    SELECT CASE WHEN pg_catalog.octet_length($1) OPERATOR(pg_catalog.>) 64 THEN pg_catalog.sha256($1) ELSE $1 END AS b
), pads AS (
    SELECT pg_catalog.decode(pg_catalog.string_agg(pg_catalog.lpad(pg_catalog.to_hex(x.byte OPERATOR(pg_catalog.#) 54),
               2, '0'::pg_catalog.text), ''::pg_catalog.text ORDER BY i), 'hex'::pg_catalog.text) AS inner_,
           pg_catalog.decode(pg_catalog.string_agg(pg_catalog.lpad(pg_catalog.to_hex(x.byte OPERATOR(pg_catalog.#) 92),
               2, '0'::pg_catalog.text), ''::pg_catalog.text ORDER BY i), 'hex'::pg_catalog.text) AS outer_
      FROM k, pg_catalog.generate_series(0, 63) AS i,
           LATERAL (SELECT CASE WHEN i OPERATOR(pg_catalog.<) pg_catalog.octet_length(k.b)
                                THEN pg_catalog.get_byte(k.b, i) ELSE 0 END AS byte) AS x
)
SELECT pg_catalog.sha256(pads.outer_ OPERATOR(pg_catalog.||)
                         pg_catalog.sha256(pads.inner_ OPERATOR(pg_catalog.||) $2))
  FROM pads
$fn$;

-- HMAC-SHA256 of message under this database's secret (sql/cdc.sql), read in this statement:
-- the secret is never a parameter a log could show (auto_explain, log_statement), as it would
-- be as cdc_hmac's key; NULL without a secret. The native edition's is Rust.
-- The body of cdc_sign (sql/cdc_sign.sql declares it).
BODY cdc_sign_wrapper LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $fn$
WITH k AS (
    SELECT s.secret AS b FROM idempotency.cdc_secret AS s ORDER BY s.created_at, s.secret LIMIT 1
), pads AS (
    SELECT pg_catalog.decode(pg_catalog.string_agg(pg_catalog.lpad(pg_catalog.to_hex(x.byte OPERATOR(pg_catalog.#) 54),
               2, '0'::pg_catalog.text), ''::pg_catalog.text ORDER BY i), 'hex'::pg_catalog.text) AS inner_,
           pg_catalog.decode(pg_catalog.string_agg(pg_catalog.lpad(pg_catalog.to_hex(x.byte OPERATOR(pg_catalog.#) 92),
               2, '0'::pg_catalog.text), ''::pg_catalog.text ORDER BY i), 'hex'::pg_catalog.text) AS outer_
      FROM k, pg_catalog.generate_series(0, 63) AS i,
           LATERAL (SELECT CASE WHEN i OPERATOR(pg_catalog.<) pg_catalog.octet_length(k.b)
                                THEN pg_catalog.get_byte(k.b, i) ELSE 0 END AS byte) AS x
)
SELECT pg_catalog.sha256(pads.outer_ OPERATOR(pg_catalog.||)
                         pg_catalog.sha256(pads.inner_ OPERATOR(pg_catalog.||) $1))
  FROM pads
$fn$;

-- idem_outbox_put's checks of its arguments, as src/entry/outbox.rs's (sql/cdc_sign.sql runs
-- them in cdc_message, so that a direct call signs nothing a put would refuse).
-- The body of outbox_put_check (sql/cdc_sign.sql declares it).
BODY outbox_put_check_wrapper LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    PERFORM idempotency.portable_name('topic'::pg_catalog.text, 'P4000'::pg_catalog.text, topic);
    IF payload IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'payload must not be null';
    END IF;
    IF dedupe_key IS NOT NULL THEN
        PERFORM idempotency.portable_name('dedupe_key'::pg_catalog.text, 'P4001'::pg_catalog.text, dedupe_key);
    END IF;
    IF pg_catalog.jsonb_typeof(headers) OPERATOR(pg_catalog.<>) 'object'::pg_catalog.text THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'headers must be a JSON object';
    END IF;
    -- The size cap, as src/entry/outbox_size.rs: payload and headers as JSON text.
    PERFORM idempotency.portable_outbox_size(payload, headers);
END
$fn$;
