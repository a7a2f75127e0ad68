-- new key, claim + complete in one transaction: the PL/pgSQL reference
\set k random(1000000000000, 999999999999999999)
BEGIN;
SELECT * FROM ref.claim_idempotency_key('orders', :k, '9f2c1e0b7a6d5c4b3a29180716253443526170819fa0b1c2d3e4f5061728394a');
SELECT ref.mark_idempotency_succeeded('orders', :k, '{"payment_id": 42, "status": "captured"}');
END;
