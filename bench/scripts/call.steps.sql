-- the same three steps as separate statements in one transaction (new key)
\set k random(1000000000000, 999999999999999999)
BEGIN;
SELECT outcome FROM idem_claim('orders', :k, idem_hash('{"amount": 1999, "currency": "EUR"}'::jsonb));
SELECT bench.effect('{"amount": 1999, "currency": "EUR"}'::jsonb) AS response \gset
SELECT idem_complete('orders', :k, :response::jsonb);
END;
