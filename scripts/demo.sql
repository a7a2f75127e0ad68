-- The idempotency extension in five steps. Run by scripts/demo.sh.
\pset footer off
CREATE EXTENSION idempotency;

-- An application table whose rows must be created exactly once per request.
CREATE TABLE payments (id bigserial PRIMARY KEY, order_id text, amount_cents int);

\echo
\echo '== 1. A new request claims its key: new_claim, attempt 1'
\echo '   (the request hash is SHA-256 of the RFC 8785 canonical JSON: key order and spacing do not matter)'
BEGIN;
SELECT outcome, attempt, locked_until > now() AS leased
FROM idem_claim('payments', 'order-1001', idem_hash('{"order": "1001", "amount_cents": 4200}'::jsonb));
INSERT INTO payments (order_id, amount_cents) VALUES ('1001', 4200);
SELECT idem_complete('payments', 'order-1001', '{"payment_id": 1, "status": "captured"}', 1);
COMMIT;

\echo
\echo '== 2. The client retries (same key, same payload spelled differently): replay_success, no second payment'
SELECT outcome, attempt, response
FROM idem_claim('payments', 'order-1001', idem_hash('{ "amount_cents": 4200.0, "order": "1001" }'::jsonb));
SELECT count(*) AS payments_for_order_1001 FROM payments WHERE order_id = '1001';

\echo
\echo '== 3. The same key reused for a different payload: error P4002 (nothing is written)'
\set ON_ERROR_STOP off
SELECT * FROM idem_claim('payments', 'order-1001', idem_hash('{"order": "1001", "amount_cents": 9900}'::jsonb));
\echo '   SQLSTATE:' :LAST_ERROR_SQLSTATE
\set ON_ERROR_STOP on

\echo
\echo '== 4. A worker claims a job, records a phase, and crashes; its lease runs out'
SELECT outcome, attempt
FROM idem_claim('jobs', 'nightly-export', 'v1', lease => '1 second', claimed_by => 'worker-a');
SELECT idem_checkpoint('jobs', 'nightly-export', 'rows_exported', attempt => 1) > now() AS lease_renewed;
SELECT pg_sleep(1.2);
\echo '   Another worker takes it over: processing_stale, attempt 2, resuming from the recovery point'
SELECT outcome, attempt, recovery_point
FROM idem_claim('jobs', 'nightly-export', 'v1', claimed_by => 'worker-b');

\echo
\echo '== 5. The first worker wakes up late; its attempt is fenced off: error P4012'
\set ON_ERROR_STOP off
SELECT idem_complete('jobs', 'nightly-export', '{"by": "worker-a"}', attempt => 1);
\echo '   SQLSTATE:' :LAST_ERROR_SQLSTATE
\set ON_ERROR_STOP on
SELECT idem_complete('jobs', 'nightly-export', '{"by": "worker-b"}', attempt => 2);

\echo
\echo '== The records'
SELECT scope, key, status, attempt, response, recovery_point, claimed_by FROM idempotency.requests ORDER BY scope, key;

\echo
\echo '== What the extension counted since the server started (idem_metrics; needs shared_preload_libraries)'
SELECT name, value FROM idem_metrics() WHERE value > 0 ORDER BY name;
\echo '== And per scope and status (the idempotency.stats view)'
SELECT * FROM idempotency.stats ORDER BY scope, status;
