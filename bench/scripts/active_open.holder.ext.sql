BEGIN;
SELECT outcome FROM idem_claim('orders', 'held', '9f2c1e0b7a6d5c4b3a29180716253443526170819fa0b1c2d3e4f5061728394a');
SELECT pg_sleep(:hold);
COMMIT;
