-- Schema and fixtures of bench/run-all.sh, in a fresh database of a throw-away cluster.
--
-- Three tables of one shape, one per contender, so each sees exactly the same data:
--   idempotency.requests   the extension (idem_claim / idem_complete)
--   ref.requests           the PL/pgSQL reference (bench/reference_plpgsql.sql)
--   floor.requests         the floor: bare INSERT ... ON CONFLICT DO NOTHING / UPDATE / SELECT
-- ref and floor are created with LIKE idempotency.requests INCLUDING ALL: same columns,
-- CHECK constraints and indexes (primary key (scope, key) and the two partial indexes).
--
-- Keys are decimal strings spread over the whole primary key (not clustered at one end):
--   bench.key(i) = ((i * 2654435761) mod 4294967311)::text, a bijection on 1..4294967310,
--   the same formula the pgbench scripts use (\set k (:i * 2654435761) % 4294967311)
--   i in 1..10000        replay set: succeeded, with a response
--   i in 10001..11000    active set: processing, lease live for 12 hours (committed claims)
--   i > 100000           filler for the table-size series (succeeded)
--   new keys             random 13-18 digit numbers from pgbench (never collide with the above)
-- Every record uses the request hash bench.hash() and scope 'orders'.
\set ON_ERROR_STOP on
SET client_min_messages = warning;

CREATE EXTENSION IF NOT EXISTS idempotency;
\ir reference_plpgsql.sql

CREATE SCHEMA IF NOT EXISTS floor;
DROP TABLE IF EXISTS floor.requests;
CREATE TABLE floor.requests (LIKE idempotency.requests INCLUDING ALL);

DROP SCHEMA IF EXISTS bench CASCADE;
CREATE SCHEMA bench;

CREATE FUNCTION bench.key(i bigint) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN ((i * 2654435761) % 4294967311)::text;

CREATE FUNCTION bench.hash() RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN '9f2c1e0b7a6d5c4b3a29180716253443526170819fa0b1c2d3e4f5061728394a';

-- Succeeded records for i in lo..hi (the replay set and the filler), created over the last day.
CREATE FUNCTION bench.fill(target regclass, lo bigint, hi bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format($q$
        INSERT INTO %s (scope, key, request_hash, status, attempt, response, claimed_at,
                        locked_until, lease, retention, created_at, updated_at, expires_at)
        SELECT 'orders', bench.key(g), bench.hash(), 'succeeded', 1,
               jsonb_build_object('payment_id', g, 'status', 'captured'), t,
               NULL, '5 minutes', '30 days', t, t, t + interval '30 days'
        FROM generate_series($1, $2) g,
             LATERAL (SELECT now() - mod(g, 86400) * interval '1 second' AS t) c$q$, target) USING lo, hi;
END $$;

-- Processing records with a live lease for i in lo..hi (claims whose workers are busy).
CREATE FUNCTION bench.fill_active(target regclass, lo bigint, hi bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format($q$
        INSERT INTO %s (scope, key, request_hash, status, attempt, claimed_at, locked_until,
                        lease, retention, created_at, updated_at, expires_at)
        SELECT 'orders', bench.key(g), bench.hash(), 'processing', 1, now(),
               now() + interval '12 hours', '12 hours', '30 days', now(), now(),
               now() + interval '30 days'
        FROM generate_series($1, $2) g$q$, target) USING lo, hi;
END $$;

-- A table back to its fixtures only (the size-0 state): replay set and active set.
CREATE FUNCTION bench.reset(target regclass) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('TRUNCATE %s', target);
    PERFORM bench.fill(target, 1, 10000);
    PERFORM bench.fill_active(target, 10001, 11000);
    EXECUTE format('ANALYZE %s', target);
END $$;

-- The "effect" of the idem_call workload: a function (jsonb) -> jsonb.
CREATE FUNCTION bench.effect(request jsonb) RETURNS jsonb
LANGUAGE sql VOLATILE
RETURN jsonb_build_object('payment_id', 42, 'amount', request -> 'amount', 'status', 'captured');

SELECT bench.reset('idempotency.requests'), bench.reset('ref.requests'), bench.reset('floor.requests');

-- Smoke checks: every contender gives the expected answer for each workload's key kind.
DO $$
DECLARE
    o text;
    n int;
BEGIN
    -- new + complete
    SELECT outcome INTO o FROM idem_claim('orders', 'smoke-new', bench.hash());
    ASSERT o = 'new_claim', 'ext new: ' || o;
    PERFORM idem_complete('orders', 'smoke-new', '{"ok": true}');
    SELECT outcome INTO o FROM ref.claim_idempotency_key('orders', 'smoke-new', bench.hash());
    ASSERT o = 'new_claim', 'ref new: ' || o;
    PERFORM ref.mark_idempotency_succeeded('orders', 'smoke-new', '{"ok": true}');
    INSERT INTO floor.requests (scope, key, request_hash, status, attempt, claimed_at, locked_until,
                                lease, retention, created_at, updated_at, expires_at)
    VALUES ('orders', 'smoke-new', bench.hash(), 'processing', 1, now(), now() + interval '5 minutes',
            '5 minutes', '24 hours', now(), now(), now() + interval '24 hours')
    ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    ASSERT n = 1, 'floor insert';
    UPDATE floor.requests SET status = 'succeeded', response = '{"ok": true}', locked_until = NULL,
                              updated_at = now()
    WHERE scope = 'orders' AND key = 'smoke-new' AND status = 'processing';
    GET DIAGNOSTICS n = ROW_COUNT;
    ASSERT n = 1, 'floor update';
    -- replay of a completed key, and of a key of the replay set
    SELECT outcome INTO o FROM idem_claim('orders', 'smoke-new', bench.hash());
    ASSERT o = 'replay_success', 'ext replay: ' || o;
    SELECT outcome INTO o FROM ref.claim_idempotency_key('orders', 'smoke-new', bench.hash());
    ASSERT o = 'replay_success', 'ref replay: ' || o;
    SELECT outcome INTO o FROM idem_claim('orders', bench.key(7), bench.hash());
    ASSERT o = 'replay_success', 'ext replay set: ' || o;
    SELECT outcome INTO o FROM ref.claim_idempotency_key('orders', bench.key(7), bench.hash());
    ASSERT o = 'replay_success', 'ref replay set: ' || o;
    SELECT status INTO o FROM floor.requests WHERE scope = 'orders' AND key = bench.key(7);
    ASSERT o = 'succeeded', 'floor replay set: ' || o;
    -- a key of the active set
    SELECT outcome INTO o FROM idem_claim('orders', bench.key(10007), bench.hash());
    ASSERT o = 'processing_active', 'ext active: ' || o;
    SELECT outcome INTO o FROM ref.claim_idempotency_key('orders', bench.key(10007), bench.hash());
    ASSERT o = 'processing_active', 'ref active: ' || o;
    -- a mismatching hash
    BEGIN
        PERFORM ref.claim_idempotency_key('orders', bench.key(7), 'other');
        RAISE EXCEPTION 'ref mismatch not raised';
    EXCEPTION WHEN SQLSTATE 'P4002' THEN NULL;
    END;
    BEGIN
        PERFORM idem_claim('orders', bench.key(7), 'other');
        RAISE EXCEPTION 'ext mismatch not raised';
    EXCEPTION WHEN SQLSTATE 'P4002' THEN NULL;
    END;
    -- a stale lease and a retryable failure are taken over by the reference too
    PERFORM ref.claim_idempotency_key('orders', 'smoke-stale', bench.hash(), '1 microsecond');
    PERFORM pg_sleep(0.01);
END $$;
DO $$
DECLARE
    r record;
BEGIN
    SELECT * INTO r FROM ref.claim_idempotency_key('orders', 'smoke-stale', bench.hash());
    ASSERT r.outcome = 'processing_stale' AND r.attempt = 2, 'ref stale: ' || r.outcome;
    PERFORM ref.mark_idempotency_failed('orders', 'smoke-stale', true, 'E1', 'try again', 2);
    SELECT * INTO r FROM ref.claim_idempotency_key('orders', 'smoke-stale', bench.hash());
    ASSERT r.outcome = 'retryable_failure' AND r.attempt = 3 AND r.failure_code = 'E1', 'ref retryable: ' || r.outcome;
    PERFORM ref.mark_idempotency_failed('orders', 'smoke-stale', false, 'E2', 'no', 3);
    SELECT * INTO r FROM ref.claim_idempotency_key('orders', 'smoke-stale', bench.hash());
    ASSERT r.outcome = 'final_failure' AND r.failure_code = 'E2', 'ref final: ' || r.outcome;
END $$;

SELECT bench.reset('idempotency.requests'), bench.reset('ref.requests'), bench.reset('floor.requests');
VACUUM ANALYZE idempotency.requests, ref.requests, floor.requests;
