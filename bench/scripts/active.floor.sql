-- claim of a key whose committed claim has a live lease (processing_active): the floor (a plain primary-key SELECT)
\set i random(10001, 11000)
\set k (:i * 2654435761) % 4294967311
SELECT status, request_hash, attempt, response, recovery_point, failure_code, failure_message, locked_until, expires_at
  FROM floor.requests WHERE scope = 'orders' AND key = :k;
