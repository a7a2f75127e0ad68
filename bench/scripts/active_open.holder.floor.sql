BEGIN;
INSERT INTO floor.requests (scope, key, request_hash, status, attempt, claimed_at, locked_until, lease, retention, created_at, updated_at, expires_at)
  VALUES ('orders', 'held', '9f2c1e0b7a6d5c4b3a29180716253443526170819fa0b1c2d3e4f5061728394a', 'processing', 1, now(), now() + interval '5 minutes', '5 minutes', '24 hours', now(), now(), now() + interval '24 hours')
  ON CONFLICT DO NOTHING;
SELECT pg_sleep(:hold);
COMMIT;
