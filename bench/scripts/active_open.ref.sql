-- claim of the key 'held' while another session's claim of it is not committed yet: the PL/pgSQL reference
SELECT * FROM ref.claim_idempotency_key('orders', 'held', '9f2c1e0b7a6d5c4b3a29180716253443526170819fa0b1c2d3e4f5061728394a');
