-- The CDC secret (sql/cdc.sql) for an edition installed before it, in an update: made as the
-- tables' owner, whoever runs the update, and an existing relation of that name is not read
-- (a superuser's update never runs the owner's code).
DO $cdc$
DECLARE
    owner_ constant pg_catalog.text := (SELECT r.rolname::pg_catalog.text FROM pg_catalog.pg_class AS c
                                        JOIN pg_catalog.pg_roles AS r ON r.oid OPERATOR(pg_catalog.=) c.relowner
                                        WHERE c.oid OPERATOR(pg_catalog.=) 'idempotency.outbox'::pg_catalog.regclass);
    was constant pg_catalog.text := pg_catalog.current_setting('role'::pg_catalog.text);
BEGIN
    IF pg_catalog.to_regclass('idempotency.cdc_secret'::pg_catalog.text) IS NOT NULL THEN
        RETURN;
    END IF;
    PERFORM pg_catalog.set_config('role'::pg_catalog.text, owner_, true);
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
    PERFORM pg_catalog.set_config('role'::pg_catalog.text, was, true);
    -- Through pg_tle (ALTER EXTENSION UPDATE) pg_dump keeps it; a plain script cannot ask.
    BEGIN
        PERFORM pg_catalog.pg_extension_config_dump('idempotency.cdc_secret'::pg_catalog.regclass, ''::pg_catalog.text);
    EXCEPTION WHEN feature_not_supported OR object_not_in_prerequisite_state THEN
        NULL;
    END;
END
$cdc$;
