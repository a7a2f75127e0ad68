-- hash a ~1 KB JSON request body (sent as text): the floor, sha256 of the bytes as sent
-- (no parsing: the same request spelled differently gets another hash)
SELECT encode(sha256(convert_to(:payload, 'UTF8')), 'hex');
