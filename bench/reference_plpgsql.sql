-- The reference: the idempotency-key pattern as plain PL/pgSQL, the page of code projects copy
-- when they do not have the extension. It is the baseline of bench/run-all.sh.
--
--   claim_idempotency_key    INSERT ... ON CONFLICT DO NOTHING; GET DIAGNOSTICS; if nothing
--                            was inserted, SELECT ... FOR UPDATE and classify the row as
--                            new / replay / active / stale / retryable / final
--   mark_idempotency_succeeded / mark_idempotency_failed
--                            UPDATE ... WHERE status = 'processing'
--
-- Its table ref.requests has the shape of idempotency.requests (LIKE ... INCLUDING ALL: same
-- columns, defaults, CHECK constraints and indexes), so both sides do the same index work. It
-- uses the extension's idem_status type only because LIKE copies column types; nothing else
-- of the extension is used. The outcome labels are those of idem_outcome, as text.
--
-- Semantics follow the extension's protocol where the pattern allows: same outcomes, the same
-- P4002 error for a key reused with another request hash, attempts fenced by number, and a
-- finished record past its expiry counts as absent. The one thing the pattern cannot do is
-- answer without waiting: the INSERT waits for another transaction's uncommitted insert of the
-- same key, and FOR UPDATE waits for a transaction that holds the row.
--
-- Usage (after CREATE EXTENSION idempotency): psql -v ON_ERROR_STOP=1 -f bench/reference_plpgsql.sql

CREATE SCHEMA IF NOT EXISTS ref;
DROP TABLE IF EXISTS ref.requests;
CREATE TABLE ref.requests (LIKE idempotency.requests INCLUDING ALL);

CREATE OR REPLACE FUNCTION ref.claim_idempotency_key(
    p_scope           text,
    p_key             text,
    p_request_hash    text,
    p_lease           interval DEFAULT '5 minutes',
    p_retention       interval DEFAULT '24 hours',
    p_claimed_by      text     DEFAULT NULL,
    OUT outcome         text,
    OUT attempt         int,
    OUT response        jsonb,
    OUT recovery_point  text,
    OUT failure_code    text,
    OUT failure_message text,
    OUT locked_until    timestamptz,
    OUT expires_at      timestamptz
)
LANGUAGE plpgsql
AS $$
DECLARE
    v_inserted int;
    v_row      ref.requests%ROWTYPE;
BEGIN
    IF p_scope IS NULL OR btrim(p_scope) = '' THEN
        RAISE EXCEPTION 'scope must not be blank' USING ERRCODE = 'P4000';
    END IF;
    IF p_key IS NULL OR btrim(p_key) = '' THEN
        RAISE EXCEPTION 'idempotency key must not be blank' USING ERRCODE = 'P4001';
    END IF;
    IF p_request_hash IS NULL OR btrim(p_request_hash) = '' THEN
        RAISE EXCEPTION 'request hash must not be blank' USING ERRCODE = 'P4003';
    END IF;

    -- 1. Try to be first.
    INSERT INTO ref.requests (scope, key, request_hash, status, attempt, claimed_by, claimed_at,
                              locked_until, lease, retention, created_at, updated_at, expires_at)
    VALUES (p_scope, p_key, p_request_hash, 'processing', 1, p_claimed_by, now(),
            now() + p_lease, p_lease, p_retention, now(), now(), now() + p_retention)
    ON CONFLICT (scope, key) DO NOTHING;
    GET DIAGNOSTICS v_inserted = ROW_COUNT;

    IF v_inserted = 1 THEN
        outcome      := 'new_claim';
        attempt      := 1;
        locked_until := now() + p_lease;
        expires_at   := now() + p_retention;
        RETURN;
    END IF;

    -- 2. The key exists: lock the record and look at it.
    SELECT * INTO v_row
    FROM ref.requests r
    WHERE r.scope = p_scope AND r.key = p_key
    FOR UPDATE;

    IF NOT FOUND THEN
        -- Deleted between our INSERT and SELECT (forgotten or purged): the caller retries.
        RAISE EXCEPTION 'idempotency record of key % vanished, retry', p_key
            USING ERRCODE = '40001';
    END IF;

    -- A finished record past its retention is as good as purged: start over.
    IF v_row.status <> 'processing' AND v_row.expires_at < now() THEN
        UPDATE ref.requests r
        SET request_hash = p_request_hash, status = 'processing', attempt = 1,
            response = NULL, recovery_point = NULL, failure_code = NULL, failure_message = NULL,
            claimed_by = p_claimed_by, claimed_at = now(), locked_until = now() + p_lease,
            lease = p_lease, retention = p_retention, created_at = now(), updated_at = now(),
            expires_at = now() + p_retention
        WHERE r.scope = p_scope AND r.key = p_key;
        outcome      := 'new_claim';
        attempt      := 1;
        locked_until := now() + p_lease;
        expires_at   := now() + p_retention;
        RETURN;
    END IF;

    IF v_row.request_hash <> p_request_hash THEN
        RAISE EXCEPTION 'idempotency key % in scope % was used for a different request', p_key, p_scope
            USING ERRCODE = 'P4002',
                  DETAIL = format('Stored request hash: %s. This request''s hash: %s.', v_row.request_hash, p_request_hash),
                  HINT = 'Reuse an idempotency key only to retry the same request.';
    END IF;

    attempt         := v_row.attempt;
    recovery_point  := v_row.recovery_point;
    failure_code    := v_row.failure_code;
    failure_message := v_row.failure_message;
    locked_until    := v_row.locked_until;
    expires_at      := v_row.expires_at;

    CASE
        WHEN v_row.status = 'succeeded' THEN
            outcome  := 'replay_success';
            response := v_row.response;
            RETURN;
        WHEN v_row.status = 'failed_final' THEN
            outcome := 'final_failure';
            RETURN;
        WHEN v_row.status = 'processing' AND v_row.locked_until >= now() THEN
            outcome := 'processing_active';
            RETURN;
        WHEN v_row.status = 'failed_retryable' THEN
            outcome := 'retryable_failure';
        ELSE
            outcome := 'processing_stale';   -- processing, lease expired
    END CASE;

    -- 3. Take the attempt over: attempt + 1, a new lease.
    UPDATE ref.requests r
    SET status = 'processing', attempt = r.attempt + 1, claimed_by = p_claimed_by,
        claimed_at = now(), locked_until = now() + p_lease, lease = p_lease,
        retention = p_retention, updated_at = now(), expires_at = now() + p_retention
    WHERE r.scope = p_scope AND r.key = p_key
    RETURNING r.attempt, r.locked_until, r.expires_at
    INTO attempt, locked_until, expires_at;
END;
$$;

CREATE OR REPLACE FUNCTION ref.mark_idempotency_succeeded(
    p_scope    text,
    p_key      text,
    p_response jsonb,
    p_attempt  int DEFAULT NULL
) RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    UPDATE ref.requests r
    SET status = 'succeeded', response = p_response, locked_until = NULL,
        failure_code = NULL, failure_message = NULL, updated_at = now(),
        expires_at = greatest(r.expires_at, now() + r.retention)
    WHERE r.scope = p_scope AND r.key = p_key
      AND r.status = 'processing'
      AND (p_attempt IS NULL OR r.attempt = p_attempt);
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cannot complete key % in scope %: it is not processing (or not attempt %)',
            p_key, p_scope, p_attempt
            USING ERRCODE = 'P4010';
    END IF;
END;
$$;

CREATE OR REPLACE FUNCTION ref.mark_idempotency_failed(
    p_scope     text,
    p_key       text,
    p_retryable boolean,
    p_code      text DEFAULT NULL,
    p_message   text DEFAULT NULL,
    p_attempt   int  DEFAULT NULL
) RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    UPDATE ref.requests r
    SET status = CASE WHEN p_retryable THEN 'failed_retryable' ELSE 'failed_final' END::idem_status,
        failure_code = p_code, failure_message = p_message, locked_until = NULL,
        updated_at = now(), expires_at = greatest(r.expires_at, now() + r.retention)
    WHERE r.scope = p_scope AND r.key = p_key
      AND r.status = 'processing'
      AND (p_attempt IS NULL OR r.attempt = p_attempt);
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cannot fail key % in scope %: it is not processing (or not attempt %)',
            p_key, p_scope, p_attempt
            USING ERRCODE = 'P4011';
    END IF;
END;
$$;
