-- idem_call: claim + the function + complete in one statement (new key)
\set k random(1000000000000, 999999999999999999)
SELECT * FROM idem_call('orders', :k, '{"amount": 1999, "currency": "EUR"}'::jsonb, 'bench.effect(jsonb)'::regprocedure);
