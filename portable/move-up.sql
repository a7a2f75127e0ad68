-- Move a database from the portable edition to the native extension, in place, in one
-- transaction (docs/managed.md): psql -v ON_ERROR_STOP=1 -f, by a superuser, on a server where the native extension
-- is installed (and preloaded, for the worker and the counters). Every row is kept: the
-- records replay, leases and attempts go on, the outbox keeps its ids.
-- Privileges and row-level security policies on the tables are not carried over: run your
-- idem_grant calls and the tenant recipe again afterwards.
--
-- The superuser running this must not run code the tables' owner controls (a cast, an
-- operator, a function, a view, a rule, a policy, a trigger, a default or a domain): the tables
-- are locked first; what it reads must be the edition's own plain tables, sequence and enum, of
-- one owner, without row-level security, with the columns of built-in types they were made
-- with, and no operator may sit in the functions' schema (55000 otherwise); the rows are read
-- as the tables' owner into temporary tables of built-in types (the enum through its output
-- function, no cast), then written as the superuser. Known gap: CREATE EXTENSION's own DDL
-- still resolves some names through the functions' schema (issue 32, the attacker review).
BEGIN;
SET LOCAL search_path = pg_catalog, pg_temp;
-- Nothing the checks below read can change before the rows are read (ACCESS EXCLUSIVE: no
-- policy, trigger, rule or view swapped in meanwhile), and a policy would raise, not run.
SET LOCAL row_security = off;
LOCK TABLE idempotency.requests, idempotency.inbox, idempotency.versions, idempotency.outbox IN ACCESS EXCLUSIVE MODE;
-- The CDC secret moves too, so message ids stay the same (older releases had no such table).
DO $secret$
BEGIN
    IF pg_catalog.to_regclass('idempotency.cdc_secret'::pg_catalog.text) IS NULL THEN
        RETURN;
    END IF;
    LOCK TABLE idempotency.cdc_secret IN ACCESS EXCLUSIVE MODE;
    IF EXISTS (SELECT FROM pg_catalog.pg_class AS c
                WHERE c.oid OPERATOR(pg_catalog.=) 'idempotency.cdc_secret'::pg_catalog.regclass
                  -- Row-level security enabled with no policy is its own state (sql/cdc_sign.sql):
                  -- it runs nothing and binds no owner. A policy or FORCE is not the edition's.
                  AND (c.relkind OPERATOR(pg_catalog.<>) 'r'::pg_catalog."char" OR c.relforcerowsecurity
                       OR EXISTS (SELECT FROM pg_catalog.pg_policy AS p WHERE p.polrelid OPERATOR(pg_catalog.=) c.oid)
                       OR EXISTS (SELECT FROM pg_catalog.pg_rewrite AS r WHERE r.ev_class OPERATOR(pg_catalog.=) c.oid)
                       OR c.relowner OPERATOR(pg_catalog.<>) (SELECT q.relowner FROM pg_catalog.pg_class AS q
                                                              WHERE q.oid OPERATOR(pg_catalog.=) 'idempotency.requests'::pg_catalog.regclass)))
       OR (SELECT pg_catalog.count(*) FROM pg_catalog.pg_attribute AS a
            WHERE a.attrelid OPERATOR(pg_catalog.=) 'idempotency.cdc_secret'::pg_catalog.regclass
              AND ((a.attname OPERATOR(pg_catalog.=) 'secret'::pg_catalog.name AND a.atttypid OPERATOR(pg_catalog.=) 'pg_catalog.bytea'::pg_catalog.regtype::pg_catalog.oid)
                   OR (a.attname OPERATOR(pg_catalog.=) 'created_at'::pg_catalog.name
                       AND a.atttypid OPERATOR(pg_catalog.=) 'pg_catalog.timestamptz'::pg_catalog.regtype::pg_catalog.oid))
              AND NOT a.attisdropped) OPERATOR(pg_catalog.<>) 2 THEN
        RAISE EXCEPTION USING ERRCODE = '55000', MESSAGE = 'cannot move up: idempotency.cdc_secret is not the portable edition''s own table',
            HINT = 'The move-up reads only the portable edition''s own tables, as it made them; restore them, or move up by dump and restore (docs/managed.md).';
    END IF;
END
$secret$;
DO $check$
DECLARE
    why pg_catalog.text;
BEGIN
    SELECT pg_catalog.format('%s.%s is not the portable edition''s own %s', w.nsp, w.rel, w.what) INTO why
      FROM (VALUES ('idempotency', 'requests', 'r', 'table'), ('idempotency', 'inbox', 'r', 'table'),
                   ('idempotency', 'versions', 'r', 'table'), ('idempotency', 'outbox', 'r', 'table'),
                   ('idempotency', 'outbox_id_seq', 'S', 'sequence')) AS w (nsp, rel, kind, what)
      LEFT JOIN pg_catalog.pg_class AS c
        ON c.relnamespace OPERATOR(pg_catalog.=) 'idempotency'::pg_catalog.regnamespace
       AND c.relname OPERATOR(pg_catalog.=) w.rel::pg_catalog.name
     WHERE c.oid IS NULL OR c.relkind OPERATOR(pg_catalog.<>) w.kind::pg_catalog."char"
        OR c.relrowsecurity OR c.relforcerowsecurity
        OR EXISTS (SELECT FROM pg_catalog.pg_policy AS p WHERE p.polrelid OPERATOR(pg_catalog.=) c.oid)
        OR c.relowner OPERATOR(pg_catalog.<>) (SELECT q.relowner FROM pg_catalog.pg_class AS q
                                               WHERE q.oid OPERATOR(pg_catalog.=) 'idempotency.requests'::pg_catalog.regclass)
        OR EXISTS (SELECT FROM pg_catalog.pg_rewrite AS r WHERE r.ev_class OPERATOR(pg_catalog.=) c.oid)
     LIMIT 1;
    IF why IS NULL THEN
        -- The generations of the layout are read through the table: plain tables too.
        SELECT pg_catalog.format('%s, a child of idempotency.requests, is not a plain table of its own', i.inhrelid::pg_catalog.regclass)
          INTO why
          FROM pg_catalog.pg_inherits AS i JOIN pg_catalog.pg_class AS c ON c.oid OPERATOR(pg_catalog.=) i.inhrelid
         WHERE i.inhparent OPERATOR(pg_catalog.=) 'idempotency.requests'::pg_catalog.regclass
           AND (c.relkind OPERATOR(pg_catalog.<>) 'r'::pg_catalog."char" OR c.relrowsecurity OR c.relforcerowsecurity
                OR EXISTS (SELECT FROM pg_catalog.pg_rewrite AS r WHERE r.ev_class OPERATOR(pg_catalog.=) c.oid))
         LIMIT 1;
    END IF;
    IF why IS NULL THEN
        -- Every column read has the type the edition made it with (no domain, no other type).
        SELECT pg_catalog.format('column %s of idempotency.%s is of type %s, not %s', w.col, w.rel,
                   COALESCE(pg_catalog.format_type(a.atttypid, NULL), 'missing'::pg_catalog.text), w.typ) INTO why
          FROM (VALUES
            ('requests', 'scope', 'text'), ('requests', 'key', 'text'), ('requests', 'request_hash', 'text'),
            ('requests', 'status', '@extschema@.idem_status'), ('requests', 'attempt', 'integer'),
            ('requests', 'response', 'jsonb'), ('requests', 'recovery_point', 'text'),
            ('requests', 'failure_code', 'text'), ('requests', 'failure_message', 'text'),
            ('requests', 'claimed_by', 'text'), ('requests', 'claimed_at', 'timestamp with time zone'),
            ('requests', 'locked_until', 'timestamp with time zone'), ('requests', 'lease', 'interval'),
            ('requests', 'retention', 'interval'), ('requests', 'created_at', 'timestamp with time zone'),
            ('requests', 'updated_at', 'timestamp with time zone'), ('requests', 'expires_at', 'timestamp with time zone'),
            ('inbox', 'consumer', 'text'), ('inbox', 'message_id', 'text'), ('inbox', 'message_hash', 'text'),
            ('inbox', 'processed_at', 'timestamp with time zone'), ('inbox', 'expires_at', 'timestamp with time zone'),
            ('versions', 'stream', 'text'), ('versions', 'entity', 'text'), ('versions', 'version', 'bigint'),
            ('versions', 'updated_at', 'timestamp with time zone'),
            ('outbox', 'id', 'bigint'), ('outbox', 'message_id', 'uuid'), ('outbox', 'topic', 'text'),
            ('outbox', 'dedupe_key', 'text'), ('outbox', 'payload', 'jsonb'), ('outbox', 'headers', 'jsonb'),
            ('outbox', 'status', 'text'), ('outbox', 'attempts', 'integer'),
            ('outbox', 'available_at', 'timestamp with time zone'), ('outbox', 'leased_until', 'timestamp with time zone'),
            ('outbox', 'last_error', 'text'), ('outbox', 'created_at', 'timestamp with time zone'),
            ('outbox', 'published_at', 'timestamp with time zone')) AS w (rel, col, typ)
          LEFT JOIN pg_catalog.pg_attribute AS a
            ON a.attrelid OPERATOR(pg_catalog.=) pg_catalog.to_regclass('idempotency.' OPERATOR(pg_catalog.||) w.rel)
           AND a.attname OPERATOR(pg_catalog.=) w.col::pg_catalog.name AND NOT a.attisdropped
          LEFT JOIN pg_catalog.pg_type AS t ON t.oid OPERATOR(pg_catalog.=) a.atttypid
         WHERE a.attnum IS NULL
            OR (w.typ OPERATOR(pg_catalog.=) '@extschema@.idem_status'
                AND (t.typtype OPERATOR(pg_catalog.<>) 'e'::pg_catalog."char"
                     OR t.typnamespace OPERATOR(pg_catalog.<>) '@extschema@'::pg_catalog.regnamespace
                     OR t.typname OPERATOR(pg_catalog.<>) 'idem_status'::pg_catalog.name))
            OR (w.typ OPERATOR(pg_catalog.<>) '@extschema@.idem_status'
                AND a.atttypid OPERATOR(pg_catalog.<>) w.typ::pg_catalog.regtype::pg_catalog.oid)
         LIMIT 1;
    END IF;
    IF why IS NULL THEN
        -- A cast of the edition's enums would be the owner's code (and would keep them from
        -- being dropped).
        SELECT pg_catalog.format('a cast from %s to %s depends on the edition''s enum %s',
                   k.castsource::pg_catalog.regtype, k.casttarget::pg_catalog.regtype, t.oid::pg_catalog.regtype) INTO why
          FROM pg_catalog.pg_type AS t JOIN pg_catalog.pg_cast AS k
            ON k.castsource OPERATOR(pg_catalog.=) t.oid OR k.casttarget OPERATOR(pg_catalog.=) t.oid
         WHERE t.typnamespace OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.regnamespace
           AND t.typname OPERATOR(pg_catalog.=) ANY ('{idem_status,idem_outcome}'::pg_catalog.name[])
         LIMIT 1;
    END IF;
    IF why IS NULL THEN
        -- CREATE EXTENSION runs the native script with search_path set to this schema: an
        -- operator there (the edition has none) could be taken by its DDL.
        SELECT pg_catalog.format('operator %s is in schema @extschema@, where CREATE EXTENSION will run', o.oid::pg_catalog.regoperator)
          INTO why FROM pg_catalog.pg_operator AS o
         WHERE o.oprnamespace OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.regnamespace LIMIT 1;
    END IF;
    IF why IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = '55000', MESSAGE = pg_catalog.format('cannot move up: %s', why),
            HINT = 'The move-up reads only the portable edition''s own tables, as it made them; restore them, or move up by dump and restore (docs/managed.md).';
    END IF;
END
$check$;

-- The rows, read as the tables' owner, into temporaries of built-in types.
CREATE TEMPORARY TABLE idem_up_requests (scope pg_catalog.text, key pg_catalog.text, request_hash pg_catalog.text,
    status pg_catalog.text, attempt pg_catalog.int4, response pg_catalog.jsonb, recovery_point pg_catalog.text,
    failure_code pg_catalog.text, failure_message pg_catalog.text, claimed_by pg_catalog.text,
    claimed_at pg_catalog.timestamptz, locked_until pg_catalog.timestamptz, lease pg_catalog.interval,
    retention pg_catalog.interval, created_at pg_catalog.timestamptz, updated_at pg_catalog.timestamptz,
    expires_at pg_catalog.timestamptz) ON COMMIT DROP;
CREATE TEMPORARY TABLE idem_up_inbox (consumer pg_catalog.text, message_id pg_catalog.text, message_hash pg_catalog.text,
    processed_at pg_catalog.timestamptz, expires_at pg_catalog.timestamptz) ON COMMIT DROP;
CREATE TEMPORARY TABLE idem_up_versions (stream pg_catalog.text, entity pg_catalog.text, version pg_catalog.int8,
    updated_at pg_catalog.timestamptz) ON COMMIT DROP;
CREATE TEMPORARY TABLE idem_up_outbox (id pg_catalog.int8, message_id pg_catalog.uuid, topic pg_catalog.text,
    dedupe_key pg_catalog.text, payload pg_catalog.jsonb, headers pg_catalog.jsonb, status pg_catalog.text,
    attempts pg_catalog.int4, available_at pg_catalog.timestamptz, leased_until pg_catalog.timestamptz,
    last_error pg_catalog.text, created_at pg_catalog.timestamptz, published_at pg_catalog.timestamptz) ON COMMIT DROP;
CREATE TEMPORARY TABLE idem_up_seq (last_value pg_catalog.int8, is_called pg_catalog.bool) ON COMMIT DROP;
CREATE TEMPORARY TABLE idem_up_secret (secret pg_catalog.bytea, created_at pg_catalog.timestamptz) ON COMMIT DROP;
DO $read$
DECLARE
    owner_ constant pg_catalog.regrole := (SELECT c.relowner::pg_catalog.regrole FROM pg_catalog.pg_class AS c
                                           WHERE c.oid OPERATOR(pg_catalog.=) 'idempotency.requests'::pg_catalog.regclass);
BEGIN
    EXECUTE pg_catalog.format('GRANT INSERT ON pg_temp.idem_up_requests, pg_temp.idem_up_inbox, pg_temp.idem_up_versions, '
        'pg_temp.idem_up_outbox, pg_temp.idem_up_seq, pg_temp.idem_up_secret TO %s', owner_);
    PERFORM pg_catalog.set_config('role'::pg_catalog.text,
        (SELECT r.rolname::pg_catalog.text FROM pg_catalog.pg_roles AS r WHERE r.oid OPERATOR(pg_catalog.=) owner_::pg_catalog.oid), true);
    INSERT INTO pg_temp.idem_up_requests
    SELECT r.scope, r.key, r.request_hash, pg_catalog.format('%s'::pg_catalog.text, r.status), r.attempt, r.response,
           r.recovery_point, r.failure_code, r.failure_message, r.claimed_by, r.claimed_at, r.locked_until, r.lease,
           r.retention, r.created_at, r.updated_at, r.expires_at
      FROM idempotency.requests AS r;
    INSERT INTO pg_temp.idem_up_inbox
    SELECT i.consumer, i.message_id, i.message_hash, i.processed_at, i.expires_at FROM idempotency.inbox AS i;
    INSERT INTO pg_temp.idem_up_versions SELECT v.stream, v.entity, v.version, v.updated_at FROM idempotency.versions AS v;
    INSERT INTO pg_temp.idem_up_outbox
    SELECT o.id, o.message_id, o.topic, o.dedupe_key, o.payload, o.headers, o.status, o.attempts, o.available_at,
           o.leased_until, o.last_error, o.created_at, o.published_at
      FROM idempotency.outbox AS o;
    INSERT INTO pg_temp.idem_up_seq SELECT s.last_value, s.is_called FROM idempotency.outbox_id_seq AS s;
    IF pg_catalog.to_regclass('idempotency.cdc_secret'::pg_catalog.text) IS NOT NULL THEN
        INSERT INTO pg_temp.idem_up_secret SELECT s.secret, s.created_at FROM idempotency.cdc_secret AS s;
    END IF;
    PERFORM pg_catalog.set_config('role'::pg_catalog.text, 'none'::pg_catalog.text, true);
END
$read$;

ALTER SCHEMA idempotency RENAME TO idempotency_portable;
DO $move$
DECLARE
    f pg_catalog.regprocedure;
BEGIN
    FOR f IN SELECT p.oid::pg_catalog.regprocedure FROM pg_catalog.pg_proc AS p
              WHERE p.pronamespace OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.regnamespace
                AND p.proname OPERATOR(pg_catalog.=) ANY ('{@NAMES@}'::pg_catalog.name[])
             UNION ALL
             SELECT p.oid::pg_catalog.regprocedure FROM pg_catalog.pg_proc AS p
              WHERE p.pronamespace OPERATOR(pg_catalog.=) 'idempotency_portable'::pg_catalog.regnamespace
                AND p.proname OPERATOR(pg_catalog.~~) E'portable\\_%' LOOP
        EXECUTE pg_catalog.format('DROP FUNCTION %s', f);
    END LOOP;
END
$move$;
ALTER TYPE @extschema@.idem_status RENAME TO idem_status_portable;
ALTER TYPE @extschema@.idem_outcome RENAME TO idem_outcome_portable;
DROP TYPE @extschema@.idem_claim_result;
DROP TYPE @extschema@.idem_call_result;
CREATE EXTENSION idempotency SCHEMA @extschema@;
INSERT INTO idempotency.requests (scope, key, request_hash, status, attempt, response, recovery_point, failure_code,
    failure_message, claimed_by, claimed_at, locked_until, lease, retention, created_at, updated_at, expires_at)
SELECT u.scope, u.key, u.request_hash, u.status::@extschema@.idem_status, u.attempt, u.response, u.recovery_point,
       u.failure_code, u.failure_message, u.claimed_by, u.claimed_at, u.locked_until, u.lease, u.retention,
       u.created_at, u.updated_at, u.expires_at
  FROM pg_temp.idem_up_requests AS u;
INSERT INTO idempotency.inbox (consumer, message_id, message_hash, processed_at, expires_at)
SELECT u.consumer, u.message_id, u.message_hash, u.processed_at, u.expires_at FROM pg_temp.idem_up_inbox AS u;
INSERT INTO idempotency.versions (stream, entity, version, updated_at)
SELECT u.stream, u.entity, u.version, u.updated_at FROM pg_temp.idem_up_versions AS u;
INSERT INTO idempotency.outbox (id, message_id, topic, dedupe_key, payload, headers, status, attempts, available_at,
    leased_until, last_error, created_at, published_at) OVERRIDING SYSTEM VALUE
SELECT u.id, u.message_id, u.topic, u.dedupe_key, u.payload, u.headers, u.status, u.attempts, u.available_at,
       u.leased_until, u.last_error, u.created_at, u.published_at
  FROM pg_temp.idem_up_outbox AS u;
SELECT pg_catalog.setval('idempotency.outbox_id_seq'::pg_catalog.regclass, s.last_value, s.is_called)
  FROM pg_temp.idem_up_seq AS s;
-- The portable edition's secret replaces the one CREATE EXTENSION made.
DELETE FROM idempotency.cdc_secret WHERE EXISTS (SELECT FROM pg_temp.idem_up_secret);
INSERT INTO idempotency.cdc_secret (secret, created_at) SELECT u.secret, u.created_at FROM pg_temp.idem_up_secret AS u;
DROP SCHEMA idempotency_portable CASCADE;
DROP TYPE @extschema@.idem_status_portable;
DROP TYPE @extschema@.idem_outcome_portable;
COMMIT;
