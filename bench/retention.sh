#!/usr/bin/env bash
# The cost of retention, flat layout (idem_purge's batched DELETE) against the generations
# layout (idem_rotate's TRUNCATE; docs/retention.md), side by side in one run on one release
# build and one cluster (bench/lib/release_cluster.sh):
#   1. claims' throughput while ROWS expired records go, as a share of the same layout's
#      throughput with nothing expiring: pgbench (CLIENTS clients, DURATION s, a new key claimed
#      and completed per transaction); 2 s in, the retention step starts: idem_purge(BATCH) in
#      a loop until it returns 0, or idem_rotate(force => true) until 'switched'. The share is
#      the mean of pgbench's per-second progress over the purge's seconds (at least 5);
#   2. WAL bytes per expired record, from pg_current_wal_lsn() around the step with no other
#      load (and around the VACUUM the DELETE needs);
#   3. replays and new keys at BIG records against a table of 1,000, in both layouts
#      (SECONDS_BIG s each).
# Usage: bench/retention.sh [MAJOR]   env: ROWS (1000000) CLIENTS (4) DURATION (30) BATCH (10000)
#        BIG (10000000) SECONDS_BIG (10) SYNC_COMMIT (on)
set -euo pipefail
cd "$(dirname "$0")/.."
major=${1:-17}
rows=${ROWS:-1000000}
clients=${CLIENTS:-4}
seconds=${DURATION:-30}
batch=${BATCH:-10000}
big=${BIG:-10000000}
seconds_big=${SECONDS_BIG:-10}
sync_commit=${SYNC_COMMIT:-on}
port=${IDEM_BENCH_PORT:-54341}
work=${IDEM_BENCH_DIR:-/var/tmp/idempotency-bench-retention}
extra_conf="max_locks_per_transaction = 256"

# shellcheck source=bench/lib/release_cluster.sh
source bench/lib/release_cluster.sh

q() { "$bindir/psql" -X -q -At -h 127.0.0.1 -p "$port" -U postgres -v ON_ERROR_STOP=1 -d "$@"; }
q postgres -c "CREATE DATABASE flat" -c "CREATE DATABASE gen"
for db in flat gen; do q "$db" -c "CREATE EXTENSION idempotency"; done
q gen -c "SELECT idem_set_layout('generations')" >/dev/null

# `n` finished records of `scope` in `table`, expired (`expired` true) or kept for a year.
records() {
  local db=$1 table=$2 scope=$3 n=$4 expired=$5
  q "$db" <<SQL
INSERT INTO $table (scope, key, request_hash, status, attempt, response, claimed_at, lease,
    retention, created_at, updated_at, expires_at)
SELECT '$scope', 'k' || g, 'h', 'succeeded', 1, '{"ok": true}', now() - interval '2 days',
       '5 minutes', '1 day', now() - interval '2 days', now() - interval '2 days',
       CASE WHEN $expired THEN now() - interval '1 day' - g * interval '1 millisecond'
            ELSE now() + interval '1 year' END
FROM generate_series(1, $n) AS g;
VACUUM ANALYZE $table;
SQL
}
# The oldest generation of database gen (the next to be emptied).
oldest() { q gen -c "SELECT idempotency.layout_table((current_generation % 3 + 1)::int2, false) FROM idempotency.layout"; }
lsn() { q "$1" -c "SELECT pg_current_wal_lsn()"; }
wal_since() { q "$1" -c "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '$2')::bigint"; }

cat > "$work/claims.sql" <<'SQL'
\set k random(1, 4611686018427387903)
SELECT idem_complete(c.scope, c.key, '{"ok": true}')
FROM (SELECT 'bench'::text AS scope, :client_id || '-' || :k AS key) AS c,
     idem_claim(c.scope, c.key, 'h') AS claim
WHERE claim.outcome = 'new_claim';
SQL
pgbench() { "$bindir/pgbench" -n -h 127.0.0.1 -p "$port" -U postgres -c "$clients" -j "$clients" "$@"; }
tps_of() { sed -n 's/^tps = \([0-9]*\).*/\1/p' "$1" | head -1; }
# Mean tps of pgbench's per-second progress lines stamped in (from, to].
mean_tps() {
  awk -v s="$2" -v e="$3" '
    /^progress: / { t = $2 + 0; if (t > s && t <= e) { sum += $4; n++ } }
    END { if (n) printf "%.1f", sum / n; else print "" }' "$1"
}
plus() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a + b }'; }

# The retention step of each layout; prints its seconds.
purge_all() { until [ "$(q flat -c "SELECT idem_purge($batch)")" = 0 ]; do :; done; }
rotate_all() {
  local step
  for _ in $(seq 1 10000); do
    step=$(q gen -c "SELECT idem_rotate(force => true, lock_wait => '100 ms', batch => $batch)")
    [ "$step" = switched ] && return 0
  done
  log "no switch: last step $step"; return 1
}

declare -A base share during step_secs
# The baseline of each layout, run before and after its retention run (ABA: the machine's drift
# between them shows); the share is against their mean.
baseline() {
  log "$1: claims with nothing expiring, ${seconds}s ($2)"
  pgbench -T "$seconds" -f "$work/claims.sql" "$1" > "$work/$1.base$2.out"
  tps_of "$work/$1.base$2.out"
}
declare -A base1 base2
for db in flat gen; do base1[$db]=$(baseline "$db" 1); done

log "loading $rows expired records into each layout"
records flat idempotency.requests old "$rows" true
records gen "$(oldest)" old "$rows" true
q flat -c CHECKPOINT
for db in flat gen; do
  log "$db: the same claims while $rows records expire"
  pgbench -T "$seconds" -P 1 --progress-timestamp -f "$work/claims.sql" "$db" \
    > "$work/$db.load.out" 2> "$work/$db.load.progress" &
  bench_pid=$!
  sleep 2
  start=$(date +%s.%N)
  if [ "$db" = flat ]; then purge_all; else rotate_all; fi
  end=$(date +%s.%N)
  wait "$bench_pid"
  step_secs[$db]=$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.2f", e - s }')
  window_end=$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.3f", (e - s < 5) ? s + 5 : e }')
  during[$db]=$(mean_tps "$work/$db.load.progress" "$start" "$window_end")
  base2[$db]=$(baseline "$db" 2)
  base[$db]=$(awk -v a="${base1[$db]}" -v b="${base2[$db]}" 'BEGIN { printf "%.0f", (a + b) / 2 }')
  share[$db]=$(awk -v a="${during[$db]}" -v b="${base[$db]}" 'BEGIN { printf "%.1f", 100 * a / b }')
  left=$(q "$db" -c "SELECT count(*) FROM idempotency.requests WHERE scope = 'old'")
  [ "$left" = 0 ] || log "$db: $left expired records left"
done

log "WAL per expired record, nothing else running"
records flat idempotency.requests wal "$rows" true
q flat -c CHECKPOINT
at=$(lsn flat); purge_all; purge_wal=$(wal_since flat "$at")
at=$(lsn flat); q flat -c "VACUUM idempotency.requests"; vacuum_wal=$(wal_since flat "$at")
records gen "$(oldest)" wal "$rows" true
q gen -c CHECKPOINT
at=$(lsn gen); rotate_all; rotate_wal=$(wal_since gen "$at")

cat > "$work/replay.sql" <<'SQL'
SELECT outcome FROM idem_claim('big', 'k' || :k, 'h');
SQL
declare -A replay fresh
big_run() { # db label keys
  { echo "\\set k random(1, $3)"; cat "$work/replay.sql"; } > "$work/replay.$2.sql"
  pgbench -T "$seconds_big" -f "$work/replay.$2.sql" "$1" > "$work/$2.replay.out"
  replay[$2]=$(tps_of "$work/$2.replay.out")
  pgbench -T "$seconds_big" -f "$work/claims.sql" "$1" > "$work/$2.new.out"
  fresh[$2]=$(tps_of "$work/$2.new.out")
}
for db in flat gen; do
  q "$db" -c "DELETE FROM idempotency.requests" -c "VACUUM idempotency.requests"
  if [ "$db" = flat ]; then small=idempotency.requests; else small=idempotency.requests_g1; fi
  records "$db" "$small" big 1000 false
  log "$db: replays and new keys at 1,000 records"
  big_run "$db" "$db.small" 1000
  log "$db: loading $big records (a third in each generation)"
  q "$db" -c "DELETE FROM idempotency.requests WHERE scope = 'big'"
  if [ "$db" = flat ]; then
    records flat idempotency.requests big "$big" false
  else
    third=$((big / 3))
    q gen <<SQL
INSERT INTO idempotency.requests_g1 (scope, key, request_hash, status, attempt, response, claimed_at,
    lease, retention, created_at, updated_at, expires_at)
SELECT 'big', 'k' || g, 'h', 'succeeded', 1, '{"ok": true}', now(), '5 minutes', '1 day', now(), now(),
       now() + interval '1 year' FROM generate_series(1, $third) AS g;
INSERT INTO idempotency.requests_g2 (scope, key, request_hash, status, attempt, response, claimed_at,
    lease, retention, created_at, updated_at, expires_at)
SELECT 'big', 'k' || g, 'h', 'succeeded', 1, '{"ok": true}', now(), '5 minutes', '1 day', now(), now(),
       now() + interval '1 year' FROM generate_series($third + 1, 2 * $third) AS g;
INSERT INTO idempotency.requests_g3 (scope, key, request_hash, status, attempt, response, claimed_at,
    lease, retention, created_at, updated_at, expires_at)
SELECT 'big', 'k' || g, 'h', 'succeeded', 1, '{"ok": true}', now(), '5 minutes', '1 day', now(), now(),
       now() + interval '1 year' FROM generate_series(2 * $third + 1, $big) AS g;
VACUUM ANALYZE idempotency.requests_g1, idempotency.requests_g2, idempotency.requests_g3;
SQL
  fi
  q "$db" -c CHECKPOINT
  log "$db: replays and new keys at $big records"
  big_run "$db" "$db.big" "$big"
done

per() { awk -v b="$1" -v r="$rows" 'BEGIN { printf "%.2f", b / r }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
cat <<OUT
# bench/retention.sh: PostgreSQL $major, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), synchronous_commit = $sync_commit
| layout | claims/s, nothing expiring (before, after) | claims/s while $rows records expire | share | the retention step |
|---|---:|---:|---:|---:|
| flat (idem_purge, batch $batch) | ${base[flat]} (${base1[flat]}, ${base2[flat]}) | ${during[flat]} | ${share[flat]} % | ${step_secs[flat]} s |
| generations (idem_rotate) | ${base[gen]} (${base1[gen]}, ${base2[gen]}) | ${during[gen]} | ${share[gen]} % | ${step_secs[gen]} s |

| WAL per expired record | bytes |
|---|---:|
| idem_purge (DELETE) | $(per "$purge_wal") |
| the VACUUM after it | $(per "$vacuum_wal") |
| idem_rotate (TRUNCATE) | $(per "$rotate_wal") |

| layout | replays/s at 1,000 | at $big | ratio | new keys/s at 1,000 | at $big | ratio |
|---|---:|---:|---:|---:|---:|---:|
| flat | ${replay[flat.small]} | ${replay[flat.big]} | $(ratio "${replay[flat.big]}" "${replay[flat.small]}") | ${fresh[flat.small]} | ${fresh[flat.big]} | $(ratio "${fresh[flat.big]}" "${fresh[flat.small]}") |
| generations | ${replay[gen.small]} | ${replay[gen.big]} | $(ratio "${replay[gen.big]}" "${replay[gen.small]}") | ${fresh[gen.small]} | ${fresh[gen.big]} | $(ratio "${fresh[gen.big]}" "${fresh[gen.small]}") |
OUT
