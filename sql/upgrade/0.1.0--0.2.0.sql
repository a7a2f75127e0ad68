-- idempotency 0.1.0 -> 0.2.0: what the upgrade script sql/idempotency--0.1.0--0.2.0.sql is
-- made from (docs/releasing.md). This file is written by hand; that one is derived from it:
-- the line `-- @functions` becomes every function of sql/ whose declaration differs from
-- sql/idempotency--0.1.0.sql's, as its file declares it (CREATE OR REPLACE), with the COMMENT,
-- REVOKE and GRANT statements that follow it there, and a line `-- @rest sql/<file>.sql` becomes
-- that file's other statements (for a file that is run again as it is, like sql/cdc_sign.sql).
-- tests/layers/upgrade_script.rs checks the derived file and writes it with IDEM_BLESS=1.
-- tests/integration/catalog/upgrade.rs proves the result: the upgraded catalog must equal a fresh install's, and every row must survive.
--
-- So a function is never typed here. What is: what only a person can decide.
--  - a new parameter with a DEFAULT (e.g. idem_claim's `wait interval DEFAULT NULL`): the
--    signature changes, so CREATE OR REPLACE cannot do it: DROP FUNCTION the old signature
--    above the line (no SQL object of the extension depends on it). A user's view or function
--    that calls the old signature blocks the DROP: say so in the release notes.
--  - a new column: ALTER TABLE idempotency.<table> ADD COLUMN ... at the END of the table in
--    the install script too (column order is compared), with the same DEFAULT/NOT NULL.
--  - a new table, constraint or index: as in its sql/ file, same names.
--  - a new enum label: ALTER TYPE @extschema@.<type> ADD VALUE ... (BEFORE/AFTER to match the
--    install script's order).
--  - grants to roles that exist already, and anything that needs the functions: below the line.
-- Like the install script, everything is schema-qualified (@extschema@ for the functions and
-- types, idempotency.* for the tables), and the tables are changed in place (ALTER), never
-- re-created: their rows are the users' data. Most of 0.2.0 is in the library: the functions
-- keep their C symbols, so the 0.1.0 definitions already call the new code.

-- ---- issue #13: idem_claim(..., wait interval DEFAULT NULL). The signature changes, so the
-- ---- 0.1.0 function is dropped (the new one is created below the line). A user's view or
-- ---- function that calls the old six-argument signature blocks the DROP.
DROP FUNCTION @extschema@.idem_claim(pg_catalog.text, pg_catalog.text, pg_catalog.text,
    pg_catalog.interval, pg_catalog.interval, pg_catalog.text);

-- ---- issue #32, finding 5: CDC message ids keyed by a per-database secret, and signed
-- ---- (a new table, as in sql/cdc.sql: tests/layers/upgrade_script.rs holds the two alike; its
-- ---- functions are below the line). Roles that may INSERT into the outbox get EXECUTE on the
-- ---- new functions, after them.
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

-- ---- issue #32: the status comparisons of idempotency.requests' CHECKs and partial indexes,
-- ---- re-created as in sql/bootstrap.sql. CREATE EXTENSION runs with search_path set to the
-- ---- extension's schema, and 0.1.0 compared the enum with untyped literals: an
-- ---- `=(anyenum, text)` planted there before the install won, and every write ran it. The
-- ---- tables' other comparisons had exact matches in pg_catalog, which is searched first.
-- ---- Both rebuilds scan idempotency.requests under its ACCESS EXCLUSIVE lock. Before issue
-- ---- #25's UPDATE below, which would otherwise check the rows with the old CHECKs.
ALTER TABLE idempotency.requests
    DROP CONSTRAINT requests_lease_check,
    DROP CONSTRAINT requests_response_check,
    ADD CONSTRAINT requests_lease_check CHECK ((status OPERATOR(pg_catalog.=) 'processing'::@extschema@.idem_status)
                                          OPERATOR(pg_catalog.=) (locked_until IS NOT NULL)),
    ADD CONSTRAINT requests_response_check CHECK (status OPERATOR(pg_catalog.=) 'succeeded'::@extschema@.idem_status OR response IS NULL);

DROP INDEX idempotency.requests_lease_idx;

CREATE INDEX requests_lease_idx ON idempotency.requests (locked_until)
    WHERE status OPERATOR(pg_catalog.=) 'processing'::@extschema@.idem_status;

DROP INDEX idempotency.requests_expiry_idx;

CREATE INDEX requests_expiry_idx ON idempotency.requests (expires_at)
    WHERE status OPERATOR(pg_catalog.<>) 'processing'::@extschema@.idem_status;

-- ---- issue #25: lease and retention bounded to 100 years (requests_intervals_check, as in
-- ---- sql/bootstrap.sql), so that upkeep's now() + retention never leaves the timestamp range.
-- ---- Rows beyond the bound (only a hand-made UPDATE could store one) are clamped first.
UPDATE idempotency.requests
   SET lease = LEAST(lease, '100 years'::pg_catalog.interval),
       retention = LEAST(retention, '100 years'::pg_catalog.interval)
 WHERE lease OPERATOR(pg_catalog.>) '100 years'::pg_catalog.interval
    OR retention OPERATOR(pg_catalog.>) '100 years'::pg_catalog.interval;

ALTER TABLE idempotency.requests DROP CONSTRAINT requests_intervals_check,
    ADD CONSTRAINT requests_intervals_check CHECK (lease OPERATOR(pg_catalog.>) '0'::pg_catalog.interval
                                               AND lease OPERATOR(pg_catalog.<=) '100 years'::pg_catalog.interval
                                               AND retention OPERATOR(pg_catalog.>) '0'::pg_catalog.interval
                                               AND retention OPERATOR(pg_catalog.<=) '100 years'::pg_catalog.interval);

-- @functions

-- ---- After the functions: what needs them.

-- @rest sql/cdc_sign.sql

-- ---- issue #25: warn when the extension's schema is writable by others, as sql/grants.sql
-- ---- does at the end of an install.
-- @rest sql/grants.sql

-- ---- issue #24: the generations layout's steps, the table owner's alone.
-- @rest sql/layout.sql

-- @rest sql/rotate.sql
