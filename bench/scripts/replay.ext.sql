-- replay of a completed key: the extension
\set i random(1, 10000)
\set k (:i * 2654435761) % 4294967311
SELECT * FROM idem_claim('orders', :k, '9f2c1e0b7a6d5c4b3a29180716253443526170819fa0b1c2d3e4f5061728394a');
