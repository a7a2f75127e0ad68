-- CDC messages that no one without the outbox grant can forge or pre-empt (docs/cdc.md,
-- idempotency.outbox_delivery = cdc_message): the secret, at install. Both editions run this
-- file and sql/cdc_sign.sql; only HMAC-SHA256 itself differs (src/entry/outbox_cdc.rs,
-- portable/cdc.sql), so ids and signatures are identical by construction. A portable update
-- makes the secret with portable/cdc_update.sql instead.

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
