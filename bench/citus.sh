#!/usr/bin/env bash
# Claims and replays through a Citus coordinator, directly on a worker (Citus MX: every node
# has the metadata and routes), and on a single plain server, on the same machine in one run.
# One machine cannot show scale-out: the point is the per-call cost of the extra hop, as
# ratios to the single server (docs/scale-out.md turns them into per-node rates).
#
#   bench/citus.sh [MAJOR] [SECONDS] [CLIENTS]     (defaults: 17, 15, 4)
#
# Uses scripts/citus.sh (the cluster is brought up fresh, distributed by key with
# idem_distribute, and brought down at the end) and a plain server on port BENCH_PORT (default
# 9790) with shared_preload_libraries = 'idempotency'. Set CITUS_SKIP_EXTENSION=1 if the
# extension is installed already; IDEM_PG_CONFIG as for scripts/citus.sh.
#
# Workloads (pgbench, simple protocol, so that the key reaches Citus as a constant and the
# call is delegated to the shard's worker):
#   claim   idem_claim of a new key (one INSERT on the key's shard)
#   replay  idem_claim of one of 10,000 succeeded keys (one index read)
set -euo pipefail

major=${1:-17}
seconds=${2:-15}
clients=${3:-4}
repo=$(cd "$(dirname "$0")/.." && pwd)
single_port=${BENCH_PORT:-9790}
work=/var/tmp/idem-citus-bench-$major
# A cluster of its own (not the one tests/clusters/citus.rs may be running).
export CITUS_BASE=/var/tmp/idem-citus-bench-cluster-$major CITUS_PORT=${CITUS_PORT:-9750}

pg_config=${IDEM_PG_CONFIG:-$(sed -n "s/^pg$major = \"\(.*\)\"\$/\1/p" "${PGRX_HOME:-$HOME/.pgrx}/config.toml" 2>/dev/null)}
pg_config=${pg_config:-/opt/idempotency-pg/$major/bin/pg_config}
bindir=$("$pg_config" --bindir)
export IDEM_PG_CONFIG=$pg_config

as_pg() {
  if [[ $(id -u) == 0 ]]; then runuser -u postgres -- env -u RUST_BACKTRACE "$@"
  else env -u RUST_BACKTRACE "$@"; fi
}

eval "$("$repo/scripts/citus.sh" up "$major")"   # PGHOST/PGPORT of the coordinator
coordinator=$PGPORT
worker=$((PGPORT + 1))
citus_host=$PGHOST
cleanup() {
  mkdir -p /tmp/idem-citus-bench-logs && cp "$work"/*.log "$CITUS_BASE"/*.log /tmp/idem-citus-bench-logs/ 2>/dev/null || true
  as_pg "$bindir/pg_ctl" -D "$work/single" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$work"
  "$repo/scripts/citus.sh" down "$major" || true
}
trap cleanup EXIT

# The single server.
rm -rf "$work" && mkdir -p "$work" && chown postgres: "$work" 2>/dev/null || true
as_pg "$bindir/initdb" -D "$work/single" -A trust -U postgres --no-sync >/dev/null
cat >>"$work/single/postgresql.conf" <<EOF
port = $single_port
listen_addresses = ''
unix_socket_directories = '$work'
shared_preload_libraries = 'idempotency'
fsync = off
synchronous_commit = off
full_page_writes = off
shared_buffers = 64MB
EOF
as_pg "$bindir/pg_ctl" -D "$work/single" -l "$work/single.log" -w start >/dev/null
psql_single() { as_pg "$bindir/psql" -X -q -v ON_ERROR_STOP=1 -h "$work" -p "$single_port" -d postgres "$@"; }
psql_citus() { as_pg "$bindir/psql" -X -q -v ON_ERROR_STOP=1 -h "$citus_host" -p "$coordinator" -d postgres "$@"; }
psql_single -c "CREATE EXTENSION idempotency"
psql_citus -c "SELECT idem_distribute('key')"

seed="SELECT idem_claim('bench', 'r' || i, 'h') FROM generate_series(1, 10000) i;
      SELECT idem_complete('bench', 'r' || i, '{}') FROM generate_series(1, 10000) i;"
psql_single -c "$seed" >/dev/null
psql_citus -c "$seed" >/dev/null

cat >"$work/claim.sql" <<'EOF'
\set n random(1, 2000000000)
SELECT outcome FROM idem_claim('bench', 'k:n-:client_id', 'h');
EOF
cat >"$work/replay.sql" <<'EOF'
\set n random(1, 10000)
SELECT outcome FROM idem_claim('bench', 'r:n', 'h');
EOF
chmod 0644 "$work"/*.sql

tps() { # host port script
  as_pg "$bindir/pgbench" -n -M simple -h "$1" -p "$2" -c "$clients" -j "$clients" -T "$seconds" \
    -f "$work/$3.sql" postgres 2>/dev/null | sed -n 's/^tps = \([0-9.]*\).*/\1/p'
}

printf 'Postgres %s, Citus 14.0.1 (coordinator + 2 workers, 32 shards by key), %s clients, %s s each, %s\n' \
  "$("$pg_config" --version | cut -d' ' -f2)" "$clients" "$seconds" "$(date -u +%FT%TZ)"
printf '%-8s %12s %14s %12s %16s %12s\n' workload single coordinator ratio "worker (MX)" ratio
for w in claim replay; do
  s=$(tps "$work" "$single_port" "$w")
  c=$(tps "$citus_host" "$coordinator" "$w")
  m=$(tps "$citus_host" "$worker" "$w")
  awk -v w="$w" -v s="$s" -v c="$c" -v m="$m" \
    'BEGIN { printf "%-8s %12.0f %14.0f %12.2f %16.0f %12.2f\n", w, s, c, c / s, m, m / s }'
done

# Upkeep on the cluster: purge of 2,000 expired records by the coordinator (per-row statements).
psql_citus -c "SELECT idem_claim('purge', 'p' || i, 'h', retention => '1 millisecond') FROM generate_series(1, 2000) i" >/dev/null
psql_citus -c "SELECT idem_complete('purge', 'p' || i, '{}') FROM generate_series(1, 2000) i" >/dev/null
sleep 0.1
start=$(date +%s.%N)
n=$(psql_citus -At -c "SELECT idem_purge(10000)")
end=$(date +%s.%N)
awk -v n="$n" -v a="$start" -v b="$end" 'BEGIN { printf "purge    %d rows through the coordinator in %.2f s: %.0f rows/s\n", n, b - a, n / (b - a) }'
