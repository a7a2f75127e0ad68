#!/usr/bin/env bash
# Purge rate of the background worker for ROWS expired records, and the claim throughput of a
# pgbench load while that purge runs, compared with the same load without it. One run:
#   1. release build (`cargo pgrx package`), into a private copy of the Postgres installation
#      (the shared one may be overwritten by other test runs while we measure);
#   2. a throw-away cluster with the library preloaded and the worker off; ROWS expired
#      `succeeded` records in scope 'old';
#   3. baseline: pgbench, CLIENTS clients for DURATION seconds, each transaction a claim of a new key
#      and its completion;
#   4. the same pgbench again; one second in, the worker is switched on (reload) and purges.
#      The throughput during the purge is the mean of pgbench's per-second progress while the
#      purge ran; the purge rate is ROWS / its duration.
# Usage: bench/purge.sh [MAJOR]   env: ROWS (1000000) CLIENTS (4) DURATION (30 s) BATCH (10000)
#        SYNC_COMMIT (on; off takes the WAL flush out of each claim, leaving CPU and locks)
set -euo pipefail
cd "$(dirname "$0")/.."
major=${1:-15}
rows=${ROWS:-1000000}
clients=${CLIENTS:-4}
seconds=${DURATION:-30}
batch=${BATCH:-10000}
sync_commit=${SYNC_COMMIT:-on}
port=${IDEM_BENCH_PORT:-54339}
work=${IDEM_BENCH_DIR:-/var/tmp/idempotency-bench}

# shellcheck source=bench/lib/release_cluster.sh
source bench/lib/release_cluster.sh

psql=("$bindir/psql" -X -q -At -h 127.0.0.1 -p "$port" -U postgres -d bench -v ON_ERROR_STOP=1)
"$bindir/psql" -X -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -c "CREATE DATABASE bench"
"${psql[@]}" -c "CREATE EXTENSION idempotency"
log "loading $rows expired records"
"${psql[@]}" <<SQL
INSERT INTO idempotency.requests (scope, key, request_hash, status, attempt, response,
    claimed_at, lease, retention, created_at, updated_at, expires_at)
SELECT 'old', 'k' || g, 'h', 'succeeded', 1, '{"ok": true}',
       now() - interval '2 days', '5 minutes', '1 day', now() - interval '2 days',
       now() - interval '2 days', now() - interval '1 day' - g * interval '1 millisecond'
FROM generate_series(1, $rows) AS g;
VACUUM ANALYZE idempotency.requests;
CHECKPOINT;
SQL

cat > "$work/claims.sql" <<'SQL'
\set k random(1, 4611686018427387903)
SELECT idem_complete(c.scope, c.key, '{"ok": true}')
FROM (SELECT 'bench'::text AS scope, :client_id || '-' || :k AS key) AS c,
     idem_claim(c.scope, c.key, 'h') AS claim
WHERE claim.outcome = 'new_claim';
SQL
pgbench=("$bindir/pgbench" -n -h 127.0.0.1 -p "$port" -U postgres -c "$clients" -j "$clients"
         -T "$seconds" -f "$work/claims.sql" -P 1 --progress-timestamp bench)

log "baseline: $clients clients, ${seconds}s, no purge"
"${pgbench[@]}" > "$work/base.out" 2> "$work/base.progress"
base_tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$work/base.out" | head -1)

purged() { "${psql[@]}" -c "SELECT value FROM idem_metrics() WHERE name = 'purged'"; }
before=$(purged)
log "the same load while the worker purges $rows records"
"${pgbench[@]}" > "$work/load.out" 2> "$work/load.progress" &
bench_pid=$!
sleep 1
"${psql[@]}" -c "ALTER SYSTEM SET idempotency.worker_enabled = on" -c "SELECT pg_reload_conf()" >/dev/null
start=$(date +%s.%N)
while [ $(( $(purged) - before )) -lt "$rows" ]; do sleep 0.1; done
end=$(date +%s.%N)
wait "$bench_pid"

# Mean tps of pgbench's per-second progress lines stamped in (from, to].
mean_tps() {
  awk -v s="$2" -v e="$3" '
    /^progress: / { t = $2 + 0; if (t > s && t <= e) { sum += $4; n++ } }
    END { if (n) printf "%.1f", sum / n; else print "" }' "$1"
}
load_tps=$(mean_tps "$work/load.progress" "$(awk -v s="$start" 'BEGIN { printf "%.3f", s + 1 }')" "$end")
after_tps=$(mean_tps "$work/load.progress" "$(awk -v e="$end" 'BEGIN { printf "%.3f", e + 1 }')" 9999999999)
purge_secs=$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.2f", e - s }')
rate=$(awk -v r="$rows" -v d="$purge_secs" 'BEGIN { printf "%.0f", r / d }')
left=$("${psql[@]}" -c "SELECT count(*) FROM idempotency.requests WHERE scope = 'old'")

echo "purge: $rows expired records in ${purge_secs}s = $rate rows/s (left: $left; batch $batch)"
echo "claims without purge: $base_tps tps ($clients clients, synchronous_commit = $sync_commit)"
if [ -n "$load_tps" ]; then
  echo "claims during purge:  $load_tps tps (mean of the seconds the purge ran)"
  echo "claims after purge:   ${after_tps:-n/a} tps (same pgbench run, the seconds after the purge)"
  awk -v a="$load_tps" -v b="$base_tps" 'BEGIN { printf "ratio: %.1f%%\n", 100 * a / b }'
else
  echo "claims during purge:  n/a (the purge took under two seconds; raise ROWS)"
fi
echo "(cores: $(nproc); load average: $(cut -d' ' -f1-3 /proc/loadavg))"
