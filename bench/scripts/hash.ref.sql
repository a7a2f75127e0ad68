-- hash a ~1 KB JSON request body (sent as text): what the PL/pgSQL pattern does (sha256 of
-- jsonb's text form: key order and whitespace normalized by jsonb, not RFC 8785)
SELECT encode(sha256(convert_to(:payload::jsonb::text, 'UTF8')), 'hex');
