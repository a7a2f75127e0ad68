-- Portable edition: a new record in generation `gen` (1 to 3) of the generations layout
-- (sql/layout.sql); the caller holds the key's lock. The outcome is NULL when the key is
-- already in that generation. Static statements, one per generation, so that their plans stay
-- cached.
CREATE FUNCTION idempotency.portable_insert_generation(
    gen pg_catalog.int2, s pg_catalog.text, k pg_catalog.text, h pg_catalog.text,
    claimed_by pg_catalog.text, lease pg_catalog.interval, retention pg_catalog.interval,
    call_at pg_catalog.timestamptz
) RETURNS @extschema@.idem_claim_result
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
#variable_conflict use_variable
DECLARE
    result @extschema@.idem_claim_result;
BEGIN
    IF gen OPERATOR(pg_catalog.=) 1::pg_catalog.int2 THEN
        INSERT INTO idempotency.requests_g1 (scope, key, request_hash, status, attempt, claimed_by,
            claimed_at, locked_until, lease, retention, created_at, updated_at, expires_at)
        VALUES (s, k, h, 'processing', 1, claimed_by, pg_catalog.now(), call_at OPERATOR(pg_catalog.+) lease,
            lease, retention, pg_catalog.now(), pg_catalog.now(), pg_catalog.now() OPERATOR(pg_catalog.+) retention)
        ON CONFLICT DO NOTHING;
    ELSIF gen OPERATOR(pg_catalog.=) 2::pg_catalog.int2 THEN
        INSERT INTO idempotency.requests_g2 (scope, key, request_hash, status, attempt, claimed_by,
            claimed_at, locked_until, lease, retention, created_at, updated_at, expires_at)
        VALUES (s, k, h, 'processing', 1, claimed_by, pg_catalog.now(), call_at OPERATOR(pg_catalog.+) lease,
            lease, retention, pg_catalog.now(), pg_catalog.now(), pg_catalog.now() OPERATOR(pg_catalog.+) retention)
        ON CONFLICT DO NOTHING;
    ELSE
        INSERT INTO idempotency.requests_g3 (scope, key, request_hash, status, attempt, claimed_by,
            claimed_at, locked_until, lease, retention, created_at, updated_at, expires_at)
        VALUES (s, k, h, 'processing', 1, claimed_by, pg_catalog.now(), call_at OPERATOR(pg_catalog.+) lease,
            lease, retention, pg_catalog.now(), pg_catalog.now(), pg_catalog.now() OPERATOR(pg_catalog.+) retention)
        ON CONFLICT DO NOTHING;
    END IF;
    -- No arbiter and no RETURNING: a generation grants INSERT only (sql/layout.sql), so the
    -- answer is built from what was inserted, as the native edition builds it.
    IF FOUND THEN
        result.outcome := 'new_claim'::@extschema@.idem_outcome;
        result.attempt := 1::pg_catalog.int4;
        result.locked_until := call_at OPERATOR(pg_catalog.+) lease;
        result.expires_at := pg_catalog.now() OPERATOR(pg_catalog.+) retention;
    END IF;
    RETURN result;
END
$fn$;
