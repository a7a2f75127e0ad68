-- hash a ~1 KB JSON request body (sent as text): the extension's canonical idem_hash over jsonb
SELECT idem_hash(:payload::jsonb);
