-- The transactional outbox (src/entry/outbox.rs): C functions over fcinfo whose SQL is fully
-- schema-qualified, so the caller's search_path cannot redirect it.

CREATE FUNCTION @extschema@.idem_outbox_put(
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

CREATE FUNCTION @extschema@.idem_outbox_take(
    batch pg_catalog.int4 DEFAULT 100,
    lease pg_catalog.interval DEFAULT '30 seconds',
    topic pg_catalog.text DEFAULT NULL
) RETURNS TABLE (
    id pg_catalog.int8,
    message_id pg_catalog.uuid,
    topic pg_catalog.text,
    payload pg_catalog.jsonb,
    headers pg_catalog.jsonb,
    attempts pg_catalog.int4
)
LANGUAGE c VOLATILE PARALLEL UNSAFE ROWS 100
AS 'MODULE_PATHNAME', 'idem_outbox_take';
COMMENT ON FUNCTION @extschema@.idem_outbox_take IS
    'Lease up to batch available messages, oldest first, skipping rows other publishers hold';

CREATE FUNCTION @extschema@.idem_outbox_ack(
    ids pg_catalog.int8[]
) RETURNS pg_catalog.int8
LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'idem_outbox_ack';
COMMENT ON FUNCTION @extschema@.idem_outbox_ack IS 'Mark messages published; returns how many were pending';

CREATE FUNCTION @extschema@.idem_outbox_nack(
    id pg_catalog.int8,
    error pg_catalog.text,
    retry_after pg_catalog.interval DEFAULT '1 minute'
) RETURNS void
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'idem_outbox_nack';
COMMENT ON FUNCTION @extschema@.idem_outbox_nack IS 'Record a failed publication and hand the message out again after retry_after';

CREATE FUNCTION @extschema@.idem_outbox_purge(
    batch pg_catalog.int4 DEFAULT 10000
) RETURNS pg_catalog.int8
LANGUAGE c VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'idem_outbox_purge';
COMMENT ON FUNCTION @extschema@.idem_outbox_purge IS
    'Delete up to batch messages published longer than idempotency.outbox_retention ago (skipping locked ones); returns how many';
