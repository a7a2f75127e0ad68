-- HMAC-SHA256 (RFC 2104) in SQL, for sql/cdc.sql's CDC message ids and signatures: the native
-- edition's is Rust (src/entry/outbox_cdc.rs); both must give the same bytes (RFC 4231 vectors,
-- tests/integration/consumers/outbox_cdc/forged.rs). Built-ins only: sha256 and get_byte.
CREATE FUNCTION idempotency.cdc_hmac(key pg_catalog.bytea, message pg_catalog.bytea)
RETURNS pg_catalog.bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
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
