#!/usr/bin/env bash
# The economics behind docs/retention-design.md: WAL bytes and time per expired record for
# today's batched DELETE (plus the VACUUM it needs) against dropping a partition that holds the
# same records. Scratch tables shaped like idempotency.requests (LIKE ... INCLUDING ALL) on a
# throw-away cluster; the extension's own functions are not involved.
#
#   bench/retention_prototype.sh PG_CONFIG [ROWS=1000000] [BATCH=10000]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pg_config=${1:?usage: bench/retention_prototype.sh PG_CONFIG [ROWS] [BATCH]}
rows=${2:-1000000} batch=${3:-10000}
bin=$("$pg_config" --bindir)
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
dir=$(mktemp -d /tmp/idem-retention.XXXXXX)
chmod 0777 "$dir"
as_pg "$bin/initdb" -A trust -U postgres --no-sync -E UTF8 --locale=C -D "$dir/data" >/dev/null
printf "fsync = off\nsynchronous_commit = off\nlisten_addresses = ''\nunix_socket_directories = '%s'\nmax_wal_size = '4GB'\n" "$dir" >>"$dir/data/postgresql.conf"
as_pg env -u RUST_BACKTRACE "$bin/pg_ctl" -w -D "$dir/data" -l "$dir/log" start >/dev/null
trap 'as_pg "$bin/pg_ctl" -D "$dir/data" -m fast stop >/dev/null; rm -rf "$dir"' EXIT
psql() { "$bin/psql" -h "$dir" -U postgres -X -q -v ON_ERROR_STOP=1 -d b "$@"; }
"$bin/psql" -h "$dir" -U postgres -X -q -d postgres -c 'CREATE DATABASE b'
"$root/scripts/portable.sh" | psql -f - >/dev/null
psql <<SQL
CREATE TABLE public.flat (LIKE idempotency.requests INCLUDING ALL);
CREATE TABLE public.gen (LIKE idempotency.requests INCLUDING DEFAULTS INCLUDING CONSTRAINTS,
                         generation pg_catalog.int2 NOT NULL) PARTITION BY LIST (generation);
ALTER TABLE public.gen ADD PRIMARY KEY (scope, key, generation);
CREATE INDEX ON public.gen (expires_at) WHERE status <> 'processing';
CREATE INDEX ON public.gen (locked_until) WHERE status = 'processing';
CREATE TABLE public.gen_0 PARTITION OF public.gen FOR VALUES IN (0);
CREATE TABLE public.gen_1 PARTITION OF public.gen FOR VALUES IN (1);
INSERT INTO public.flat (scope, key, request_hash, status, attempt, response, claimed_at, locked_until,
                         lease, retention, created_at, updated_at, expires_at)
SELECT 'old', 'k' || i, 'h', 'succeeded', 1, '{"ok": true}', now() - interval '2 days', NULL,
       '5 minutes', '1 day', now() - interval '2 days', now() - interval '2 days', now() - interval '1 day'
  FROM generate_series(1, $rows) AS i;
INSERT INTO public.gen SELECT *, 0 FROM public.flat;
VACUUM ANALYZE public.flat;
VACUUM ANALYZE public.gen;
CHECKPOINT;
SQL
lsn() { psql -Atc 'SELECT pg_catalog.pg_current_wal_lsn()'; }
now() { date +%s.%N; }
per_row() { psql -Atc "SELECT pg_catalog.round(pg_catalog.pg_wal_lsn_diff('$2', '$1') / $rows, 2)"; }
# Today: idem_purge's statement shape, a batch per transaction, until nothing is left.
l0=$(lsn) t0=$(now)
while [ "$(psql -Atc "WITH d AS (DELETE FROM public.flat WHERE ctid = ANY (ARRAY(
          SELECT ctid FROM public.flat WHERE expires_at < now() AND status <> 'processing'
           ORDER BY expires_at LIMIT $batch)) RETURNING 1) SELECT count(*) FROM d")" != 0 ]; do :; done
l1=$(lsn) t1=$(now)
psql -c 'VACUUM public.flat'
l2=$(lsn) t2=$(now)
# The design: the generation holding them is detached and dropped.
psql -c 'ALTER TABLE public.gen DETACH PARTITION public.gen_0 CONCURRENTLY'
psql -c 'DROP TABLE public.gen_0'
l3=$(lsn) t3=$(now)
printf '%-44s %14s %10s\n' "$rows expired records" "WAL bytes/row" "seconds"
printf '%-44s %14s %10.2f\n' "batched DELETE ($batch per transaction)" "$(per_row "$l0" "$l1")" "$(echo "$t1 - $t0" | bc)"
printf '%-44s %14s\n' "the VACUUM after it" "$(per_row "$l1" "$l2")"
printf '%-44s %14s %10.2f\n' "DETACH PARTITION CONCURRENTLY + DROP" "$(per_row "$l2" "$l3")" "$(echo "$t3 - $t2" | bc)"
echo "($("$bin/postgres" --version))"
