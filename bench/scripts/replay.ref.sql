-- replay of a completed key: the PL/pgSQL reference
\set i random(1, 10000)
\set k (:i * 2654435761) % 4294967311
SELECT * FROM ref.claim_idempotency_key('orders', :k, '9f2c1e0b7a6d5c4b3a29180716253443526170819fa0b1c2d3e4f5061728394a');
