-- idem_hash(doc) against Postgres' own, non-canonical
--   encode(sha256(convert_to(doc::text, 'UTF8')), 'hex')
-- over the same ~1 KB order-like jsonb documents, in one run, rounds alternating.
--
-- Usage (the idempotency functions must be on the search_path):
--   psql -X -q -v rows=100000 -v rounds=5 -f bench/hash_vs_sha256.sql
-- or bench/run.sh, which builds a release library and runs this in a throwaway cluster.
\set ON_ERROR_STOP on
\if :{?rows}
\else
  \set rows 100000
\endif
\if :{?rounds}
\else
  \set rounds 5
\endif
SET max_parallel_workers_per_gather = 0;  -- one core per variant: compare per-document cost
SET jit = off;
SET client_min_messages = warning;

DROP TABLE IF EXISTS idem_bench_orders;
CREATE TABLE idem_bench_orders AS
SELECT g AS id,
       jsonb_build_object(
         'order_id', 'ord_' || lpad(g::text, 12, '0'),
         'created_at', '2026-11-22T10:' || lpad((g % 60)::text, 2, '0') || ':' || lpad((g * 7 % 60)::text, 2, '0') || 'Z',
         'customer', jsonb_build_object(
           'id', 100000 + g,
           'email', 'customer' || g || '@example.com',
           'name', 'Zoë O''Brien',
           'vip', g % 2 = 0),
         'items', (SELECT jsonb_agg(jsonb_build_object(
                     'sku', 'SKU-' || lpad(((g * 7 + j) % 100000)::text, 5, '0'),
                     'name', 'Widget ' || j || ' – série ' || g % 13,
                     'qty', 1 + (g + j) % 5,
                     'unit_price', (((g * 31 + j) % 50000) / 100.0)::numeric(10, 2),
                     'discount', (((g + j) % 3) / 10.0)::numeric(3, 1),
                     'tags', jsonb_build_array('blue', 'large', 'gift')))
                   FROM generate_series(0, 3) j),
         'shipping', jsonb_build_object(
           'method', 'express',
           'address', jsonb_build_object(
             'street', g % 200 || ' Rue de l''Église',
             'city', 'Zürich',
             'zip', '80' || lpad((g % 100)::text, 2, '0'),
             'country', 'CH'),
           'cost', 9.9),
         'currency', 'EUR',
         'total', ((100 + g % 900) + (g % 100) / 100.0)::numeric(12, 2),
         'coupon', null,
         'notes', E'Leave at the door\nRing twice',
         'trace_id', md5(g::text)) AS doc
FROM generate_series(1, :rows) g;
VACUUM ANALYZE idem_bench_orders;

SELECT count(*) AS documents,
       round(avg(octet_length(doc::text))) AS avg_text_bytes,
       round(avg(pg_column_size(doc))) AS avg_jsonb_bytes,
       pg_size_pretty(pg_total_relation_size('idem_bench_orders')) AS table_size
FROM idem_bench_orders;

-- Sanity: the canonical hash is what it should be on one document.
SELECT idem_hash(doc) = encode(sha256(convert_to(idem_canonical(doc), 'UTF8')), 'hex') AS hash_is_sha256_of_canonical
FROM idem_bench_orders WHERE id = 1;

SELECT set_config('idem_bench.rounds', :'rounds', false) \gset
CREATE TEMP TABLE idem_bench_timing (variant text, round int, ms float8);

DO $bench$
DECLARE
  rounds int := current_setting('idem_bench.rounds')::int;
  t0 timestamptz;
BEGIN
  -- Warm-up: buffers, catalog caches, first-call costs.
  PERFORM count(idem_hash(doc)) FROM idem_bench_orders;
  PERFORM count(encode(sha256(convert_to(doc::text, 'UTF8')), 'hex')) FROM idem_bench_orders;
  FOR r IN 1..rounds LOOP
    t0 := clock_timestamp();
    PERFORM count(doc) FROM idem_bench_orders;
    INSERT INTO idem_bench_timing VALUES ('scan only: count(doc)', r, 1000 * extract(epoch FROM clock_timestamp() - t0));

    t0 := clock_timestamp();
    PERFORM count(encode(sha256(convert_to(doc::text, 'UTF8')), 'hex')) FROM idem_bench_orders;
    INSERT INTO idem_bench_timing VALUES ('sha256(doc::text) [baseline]', r, 1000 * extract(epoch FROM clock_timestamp() - t0));

    t0 := clock_timestamp();
    PERFORM count(idem_hash(doc)) FROM idem_bench_orders;
    INSERT INTO idem_bench_timing VALUES ('idem_hash(doc)', r, 1000 * extract(epoch FROM clock_timestamp() - t0));

    t0 := clock_timestamp();
    PERFORM count(idem_hash(doc::json)) FROM idem_bench_orders;
    INSERT INTO idem_bench_timing VALUES ('idem_hash(doc::json) [info]', r, 1000 * extract(epoch FROM clock_timestamp() - t0));
  END LOOP;
END
$bench$;

WITH med AS (
  SELECT variant, percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) AS ms, min(ms) AS best_ms
  FROM idem_bench_timing GROUP BY variant
), docs AS (SELECT count(*) AS n FROM idem_bench_orders)
SELECT m.variant,
       round(m.ms::numeric, 1) AS median_ms,
       round(m.best_ms::numeric, 1) AS best_ms,
       round((1e6 * m.ms / d.n)::numeric, 0) AS ns_per_doc,
       round((m.ms / b.ms)::numeric, 3) AS ratio_to_baseline,
       round(((m.ms - s.ms) / (b.ms - s.ms))::numeric, 3) AS ratio_excluding_scan
FROM med m, docs d,
     (SELECT ms FROM med WHERE variant LIKE 'sha256%') b,
     (SELECT ms FROM med WHERE variant LIKE 'scan only%') s
ORDER BY m.ms;

DROP TABLE idem_bench_orders;
