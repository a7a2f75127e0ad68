-- replay of a completed key: the floor (a plain primary-key SELECT)
\set i random(1, 10000)
\set k (:i * 2654435761) % 4294967311
SELECT status, request_hash, attempt, response, recovery_point, failure_code, failure_message, locked_until, expires_at
  FROM floor.requests WHERE scope = 'orders' AND key = :k;
