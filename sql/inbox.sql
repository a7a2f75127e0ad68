-- The inbox and ordered updates (src/entry/inbox.rs, src/entry/versions.rs): C functions over fcinfo whose
-- SQL is fully schema-qualified, so the caller's search_path cannot redirect it.

CREATE FUNCTION @extschema@.idem_inbox_accept(
    consumer pg_catalog.text,
    message_id pg_catalog.text,
    message_hash pg_catalog.text,
    retention pg_catalog.interval DEFAULT '7 days'
) RETURNS pg_catalog.bool
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'idem_inbox_accept';
COMMENT ON FUNCTION @extschema@.idem_inbox_accept IS
    'true the first time a consumer sees a message (apply its effect in this transaction), false for a duplicate; P4050 if the id comes back with another hash';

CREATE FUNCTION @extschema@.idem_inbox_purge(
    batch pg_catalog.int4 DEFAULT 10000
) RETURNS pg_catalog.int8
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'idem_inbox_purge';
COMMENT ON FUNCTION @extschema@.idem_inbox_purge IS 'Delete up to batch expired inbox rows (skipping locked ones); returns how many';

CREATE FUNCTION @extschema@.idem_advance(
    stream pg_catalog.text,
    entity pg_catalog.text,
    version pg_catalog.int8
) RETURNS pg_catalog.bool
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'idem_advance';
COMMENT ON FUNCTION @extschema@.idem_advance IS
    'true (and records it) when version is newer than the last applied one of (stream, entity); false for a duplicate or older event';
