-- Pure functions (src/entry/canonical.rs, src/entry/lock_key.rs): RFC 8785 canonical JSON of a
-- json or jsonb value and its SHA-256, and the 64-bit key of (scope, key) for an application's
-- own advisory locks.

CREATE FUNCTION @extschema@.idem_canonical(payload pg_catalog.jsonb)
RETURNS pg_catalog.text
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'idem_canonical_jsonb_wrapper';
COMMENT ON FUNCTION @extschema@.idem_canonical(pg_catalog.jsonb) IS
    'RFC 8785 canonical JSON text of the value';

CREATE FUNCTION @extschema@.idem_canonical(payload pg_catalog.json)
RETURNS pg_catalog.text
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'idem_canonical_json_wrapper';
COMMENT ON FUNCTION @extschema@.idem_canonical(pg_catalog.json) IS
    'RFC 8785 canonical JSON text of the value (a duplicate member name is 22030)';

CREATE FUNCTION @extschema@.idem_hash(payload pg_catalog.jsonb)
RETURNS pg_catalog.text
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'idem_hash_jsonb_wrapper';
COMMENT ON FUNCTION @extschema@.idem_hash(pg_catalog.jsonb) IS
    'Lowercase hex SHA-256 of the RFC 8785 canonical text: a request_hash for idem_claim';

CREATE FUNCTION @extschema@.idem_hash(payload pg_catalog.json)
RETURNS pg_catalog.text
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'idem_hash_json_wrapper';
COMMENT ON FUNCTION @extschema@.idem_hash(pg_catalog.json) IS
    'Lowercase hex SHA-256 of the RFC 8785 canonical text: a request_hash for idem_claim';

CREATE FUNCTION @extschema@.idem_hash(payload pg_catalog.jsonb, fields pg_catalog.text[])
RETURNS pg_catalog.text
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'idem_hash_jsonb_fields_wrapper';
COMMENT ON FUNCTION @extschema@.idem_hash(pg_catalog.jsonb, pg_catalog.text[]) IS
    'idem_hash of the object made of only the listed top-level members of payload';

CREATE FUNCTION @extschema@.idem_lock_key(key pg_catalog.text)
RETURNS pg_catalog.int8
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'idem_lock_key_wrapper';
COMMENT ON FUNCTION @extschema@.idem_lock_key(pg_catalog.text) IS
    'idem_lock_key of (empty scope, key)';

CREATE FUNCTION @extschema@.idem_lock_key(scope pg_catalog.text, key pg_catalog.text)
RETURNS pg_catalog.int8
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'idem_lock_key_scoped_wrapper';
COMMENT ON FUNCTION @extschema@.idem_lock_key(pg_catalog.text, pg_catalog.text) IS
    '64-bit key of (scope, key) for the application''s own advisory locks (XXH3-64 of the length-prefixed pair)';
