#!/usr/bin/env bash
# Upkeep of a distributed idempotency.requests, side by side in one run (issue 24, part 2): the
# background workers purge N expired records, first with idempotency.citus_upkeep = coordinator
# (the coordinator alone, row by row through itself), then with = shards (each of the two
# workers on the shard placements it holds, set-based and locally). Rows/s for each, and the
# ratio. One machine: the two workers share its cores, so this shows the per-row cost of each
# way and a lower bound on the gain; on separate machines the shard rate adds up per worker.
#
#   bench/citus_purge.sh [MAJOR] [ROWS]      (defaults: 17, 20000)
#
# Uses scripts/citus.sh (a cluster of its own, brought down at the end); set
# CITUS_SKIP_EXTENSION=1 if the extension is installed already, IDEM_PG_CONFIG as there.
set -euo pipefail

major=${1:-17}
rows=${2:-20000}
repo=$(cd "$(dirname "$0")/.." && pwd)
export CITUS_BASE=/var/tmp/idem-citus-purge-cluster-$major CITUS_PORT=${CITUS_PORT:-9760}
pg_config=${IDEM_PG_CONFIG:-/opt/idempotency-pg/$major/bin/pg_config}
bindir=$("$pg_config" --bindir)
export IDEM_PG_CONFIG=$pg_config

as_pg() {
  if [[ $(id -u) == 0 ]]; then runuser -u postgres -- env -u RUST_BACKTRACE "$@"
  else env -u RUST_BACKTRACE "$@"; fi
}

eval "$("$repo/scripts/citus.sh" up "$major")"   # PGHOST/PGPORT of the coordinator
trap '"$repo/scripts/citus.sh" down "$major" || true' EXIT
node() { as_pg "$bindir/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$PGHOST" -p "$1" -d postgres "${@:2}"; }
coordinator=$PGPORT
node "$coordinator" -c "SELECT idem_distribute('key')" >/dev/null

# Rounds back to back, the whole of a core when there is work: the rate, not the share.
set_all() {
  for p in "$coordinator" $((coordinator + 1)) $((coordinator + 2)); do
    node "$p" -c "ALTER SYSTEM SET idempotency.citus_upkeep = $1" \
      -c "ALTER SYSTEM SET idempotency.naptime = '100ms'" \
      -c "ALTER SYSTEM SET idempotency.batch_size = 5000" \
      -c "ALTER SYSTEM SET idempotency.maintenance_share = 100" \
      -c "SELECT pg_reload_conf()" >/dev/null
  done
}

printf 'Postgres %s, Citus 14.0.1 (coordinator + 2 workers, 32 shards by key), %s expired records, %s\n' \
  "$("$pg_config" --version | cut -d' ' -f2)" "$rows" "$(date -u +%FT%TZ)"
printf '%-12s %10s %10s %10s\n' upkeep rows seconds rows/s
declare -A rate
for mode in coordinator shards; do
  # Seeded with the worker off (so the purge starts from a full table), then switched on.
  set_all "$mode"
  for p in "$coordinator" $((coordinator + 1)) $((coordinator + 2)); do
    node "$p" -c "ALTER SYSTEM SET idempotency.worker_enabled = off" -c "SELECT pg_reload_conf()" >/dev/null
  done
  sleep 1
  node "$coordinator" -c "SELECT idem_claim('purge-$mode', 'p' || i, 'h', retention => '1 millisecond') FROM generate_series(1, $rows) i" >/dev/null
  node "$coordinator" -c "SELECT idem_complete('purge-$mode', 'p' || i, '{}') FROM generate_series(1, $rows) i" >/dev/null
  start=$(date +%s.%N)
  for p in "$coordinator" $((coordinator + 1)) $((coordinator + 2)); do
    node "$p" -c "ALTER SYSTEM SET idempotency.worker_enabled = on" -c "SELECT pg_reload_conf()" >/dev/null
  done
  while [ "$(node "$coordinator" -c "SELECT count(*) FROM idempotency.requests WHERE scope = 'purge-$mode'")" != 0 ]; do
    sleep 0.1
  done
  end=$(date +%s.%N)
  rate[$mode]=$(awk -v n="$rows" -v a="$start" -v b="$end" 'BEGIN { printf "%.0f", n / (b - a) }')
  awk -v m="$mode" -v n="$rows" -v a="$start" -v b="$end" \
    'BEGIN { printf "%-12s %10d %10.2f %10.0f\n", m, n, b - a, n / (b - a) }'
done
awk -v c="${rate[coordinator]}" -v s="${rate[shards]}" 'BEGIN { printf "shards / coordinator: %.1fx\n", s / c }'
