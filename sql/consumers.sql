-- State of the consumer-side functions: the inbox (deduplicated deliveries), the last applied
-- version per entity (ordered updates), and the transactional outbox. Like idempotency.requests:
-- schema-qualified (operators and literals' types too: sql/bootstrap.sql says why), CHECK
-- constraints that keep rows sane, dumped by pg_dump, nothing for PUBLIC.

-- One row per message a consumer accepted: idem_inbox_accept.
CREATE TABLE idempotency.inbox (
    consumer     pg_catalog.text        NOT NULL,
    message_id   pg_catalog.text        NOT NULL,
    message_hash pg_catalog.text        NOT NULL,
    processed_at pg_catalog.timestamptz NOT NULL,
    expires_at   pg_catalog.timestamptz NOT NULL,
    CONSTRAINT inbox_pkey PRIMARY KEY (consumer, message_id),
    CONSTRAINT inbox_consumer_check CHECK (pg_catalog.octet_length(consumer) OPERATOR(pg_catalog.>=) 1 AND pg_catalog.octet_length(consumer) OPERATOR(pg_catalog.<=) 255),
    CONSTRAINT inbox_message_id_check CHECK (pg_catalog.octet_length(message_id) OPERATOR(pg_catalog.>=) 1
                                             AND pg_catalog.octet_length(message_id) OPERATOR(pg_catalog.<=) 255),
    CONSTRAINT inbox_message_hash_check CHECK (pg_catalog.octet_length(message_hash) OPERATOR(pg_catalog.>=) 1
                                               AND pg_catalog.octet_length(message_hash) OPERATOR(pg_catalog.<=) 255),
    CONSTRAINT inbox_times_check CHECK (expires_at OPERATOR(pg_catalog.>) processed_at)
);
COMMENT ON TABLE idempotency.inbox IS 'Messages each consumer accepted (idem_inbox_accept); a row past expires_at counts as absent';
CREATE INDEX inbox_expiry_idx ON idempotency.inbox (expires_at);

-- The last applied version of each entity of a stream: idem_advance.
CREATE TABLE idempotency.versions (
    stream     pg_catalog.text        NOT NULL,
    entity     pg_catalog.text        NOT NULL,
    version    pg_catalog.int8        NOT NULL,
    updated_at pg_catalog.timestamptz NOT NULL,
    CONSTRAINT versions_pkey PRIMARY KEY (stream, entity),
    CONSTRAINT versions_stream_check CHECK (pg_catalog.octet_length(stream) OPERATOR(pg_catalog.>=) 1 AND pg_catalog.octet_length(stream) OPERATOR(pg_catalog.<=) 255),
    CONSTRAINT versions_entity_check CHECK (pg_catalog.octet_length(entity) OPERATOR(pg_catalog.>=) 1 AND pg_catalog.octet_length(entity) OPERATOR(pg_catalog.<=) 255)
);
COMMENT ON TABLE idempotency.versions IS 'Last applied version per (stream, entity) (idem_advance)';

-- The transactional outbox: idem_outbox_put / take / ack / nack.
-- A row is 'pending' until acknowledged, then 'published'. A pending row is available when
-- available_at has passed and it has no live lease (leased_until NULL or past): a lease that
-- runs out without an ack hands the row out again.
CREATE TABLE idempotency.outbox (
    id           pg_catalog.int8        GENERATED ALWAYS AS IDENTITY,
    message_id   pg_catalog.uuid        NOT NULL DEFAULT pg_catalog.gen_random_uuid(),
    topic        pg_catalog.text        NOT NULL,
    dedupe_key   pg_catalog.text,
    payload      pg_catalog.jsonb       NOT NULL,
    headers      pg_catalog.jsonb,
    status       pg_catalog.text        NOT NULL DEFAULT 'pending'::pg_catalog.text,
    attempts     pg_catalog.int4        NOT NULL DEFAULT 0,
    available_at pg_catalog.timestamptz NOT NULL,
    leased_until pg_catalog.timestamptz,
    last_error   pg_catalog.text,
    created_at   pg_catalog.timestamptz NOT NULL,
    published_at pg_catalog.timestamptz,
    CONSTRAINT outbox_pkey PRIMARY KEY (id),
    CONSTRAINT outbox_dedupe_key UNIQUE (topic, dedupe_key),
    CONSTRAINT outbox_status_check CHECK (status OPERATOR(pg_catalog.=) ANY (ARRAY['pending'::pg_catalog.text, 'published'::pg_catalog.text])),
    CONSTRAINT outbox_topic_check CHECK (pg_catalog.octet_length(topic) OPERATOR(pg_catalog.>=) 1 AND pg_catalog.octet_length(topic) OPERATOR(pg_catalog.<=) 255),
    CONSTRAINT outbox_dedupe_key_check CHECK (dedupe_key IS NULL OR (pg_catalog.octet_length(dedupe_key) OPERATOR(pg_catalog.>=) 1
                                                                  AND pg_catalog.octet_length(dedupe_key) OPERATOR(pg_catalog.<=) 255)),
    CONSTRAINT outbox_headers_check CHECK (headers IS NULL OR pg_catalog.jsonb_typeof(headers) OPERATOR(pg_catalog.=) 'object'::pg_catalog.text),
    CONSTRAINT outbox_attempts_check CHECK (attempts OPERATOR(pg_catalog.>=) 0),
    CONSTRAINT outbox_last_error_check CHECK (pg_catalog.octet_length(last_error) OPERATOR(pg_catalog.<=) 8192),
    -- published exactly when published_at is set, and a published row holds no lease
    CONSTRAINT outbox_published_check CHECK ((status OPERATOR(pg_catalog.=) 'published'::pg_catalog.text)
                                            OPERATOR(pg_catalog.=) (published_at IS NOT NULL)),
    CONSTRAINT outbox_lease_check CHECK (status OPERATOR(pg_catalog.=) 'pending'::pg_catalog.text OR leased_until IS NULL)
);
COMMENT ON TABLE idempotency.outbox IS 'Transactional outbox: messages enqueued with the transaction that caused them (idem_outbox_put)';
COMMENT ON COLUMN idempotency.outbox.message_id IS 'Stable id of the message, for consumers to deduplicate by (idem_inbox_accept)';
COMMENT ON COLUMN idempotency.outbox.attempts IS 'How many times idem_outbox_take handed the row out';

-- idem_outbox_take scans pending rows oldest first; idem_outbox_purge published rows by age.
CREATE INDEX outbox_pending_idx ON idempotency.outbox (id) WHERE status OPERATOR(pg_catalog.=) 'pending'::pg_catalog.text;
CREATE INDEX outbox_published_idx ON idempotency.outbox (published_at) WHERE status OPERATOR(pg_catalog.=) 'published'::pg_catalog.text;

-- Application data: pg_dump keeps it.
SELECT pg_catalog.pg_extension_config_dump('idempotency.inbox', '');
SELECT pg_catalog.pg_extension_config_dump('idempotency.versions', '');
SELECT pg_catalog.pg_extension_config_dump('idempotency.outbox', '');
SELECT pg_catalog.pg_extension_config_dump('idempotency.outbox_id_seq', '');

REVOKE ALL ON idempotency.inbox FROM PUBLIC;
REVOKE ALL ON idempotency.versions FROM PUBLIC;
REVOKE ALL ON idempotency.outbox FROM PUBLIC;
