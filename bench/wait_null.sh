#!/usr/bin/env bash
# Does `idem_claim(..., wait => NULL)` (the default) cost anything? pgbench, side by side: the
# library built from BASE (before `wait` existed) against the one built from HEAD, swapped under
# one cluster (preloaded from an absolute path, restarted between runs), contender order rotating
# per round; the SQL is HEAD's (the old library simply ignores the 7th argument).
# Scripts: bench/scripts/replay.ext.sql (replay of a completed key) and active.ext.sql (a key in
# flight: processing_active, the outcome `wait` acts on).
# Usage: bench/wait_null.sh BASE_COMMIT [rounds=5] [seconds=8]
#        (PG_CONFIG, default Postgres 18 as set up by pgrx-config/setup.sh; CLIENTS default 4)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
base=${1:?usage: bench/wait_null.sh BASE_COMMIT [rounds] [seconds]}
rounds=${2:-5}
secs=${3:-8}
clients=${CLIENTS:-4}
PG_CONFIG=${PG_CONFIG:-$(sed -n 's/^pg18 = "\(.*\)"$/\1/p' "${PGRX_HOME:-$HOME/.pgrx}/config.toml")}
bindir=$("$PG_CONFIG" --bindir)
major=$("$PG_CONFIG" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
port=${PORT:-28817}
work=${WORK:-/var/tmp/idem-wait-bench}
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

build() { # build $1 (a work tree) into $2.so, and keep its SQL as $2.sql
  (cd "$1" && env -u RUST_BACKTRACE CARGO_TARGET_DIR="$repo/target" cargo pgrx package \
     --pg-config "$PG_CONFIG" --features "pg$major" --no-default-features >&2)
  local pkg="$repo/target/release/idempotency-pg$major"
  cp "$(find "$pkg" -name idempotency.so | head -n1)" "$2.so"
  cp "$(find "$pkg" -name 'idempotency--*.sql' | head -n1)" "$2.sql"
}

rm -rf "$work"
mkdir -p "$work/lib"
build "$repo" "$work/new"
mkdir -p "$work/base-src"
git -C "$repo" archive "$base" | tar -x -C "$work/base-src"
build "$work/base-src" "$work/old"
rm -rf "$work/base-src"
[ "$(id -u)" = 0 ] && chown -R postgres "$work"

use() { # make $1 (old|new) the library the cluster loads
  cp "$work/$1.so" "$work/lib/idempotency.so.tmp"
  mv "$work/lib/idempotency.so.tmp" "$work/lib/idempotency.so"
}
stop() { as_pg "$bindir/pg_ctl" -D "$work/data" -m fast stop >/dev/null 2>&1 || true; }
trap 'stop; rm -rf "$work"' EXIT
use new
as_pg "$bindir/initdb" -D "$work/data" -A trust -U postgres -E UTF8 --locale=C >/dev/null
cat >> "$work/data/postgresql.auto.conf" <<CONF
port = $port
listen_addresses = ''
unix_socket_directories = '$work'
shared_buffers = '256MB'
shared_preload_libraries = '$work/lib/idempotency'
idempotency.worker_enabled = off
CONF
start() { as_pg env -u RUST_BACKTRACE "$bindir/pg_ctl" -D "$work/data" -l "$work/log" -w start >/dev/null; }
start
psql=("$bindir/psql" -X -q -h "$work" -p "$port" -U postgres -d postgres)
sed -e "s|MODULE_PATHNAME|$work/lib/idempotency|g" -e 's|@extschema@|public|g' \
  -e '/pg_extension_config_dump/d' -e '/^\\echo/d' -e '/^\\quit/d' "$work/new.sql" |
  "${psql[@]}" -v ON_ERROR_STOP=1 >/dev/null
# Fixtures as bench/setup.sql makes them: i in 1..10000 succeeded, 10001..11000 processing.
"${psql[@]}" -v ON_ERROR_STOP=1 <<'SQL'
INSERT INTO idempotency.requests (scope, key, request_hash, status, attempt, response, claimed_at,
    locked_until, lease, retention, created_at, updated_at, expires_at)
SELECT 'orders', ((g * 2654435761) % 4294967311)::text,
       '9f2c1e0b7a6d5c4b3a29180716253443526170819fa0b1c2d3e4f5061728394a',
       CASE WHEN g <= 10000 THEN 'succeeded' ELSE 'processing' END::idem_status, 1,
       CASE WHEN g <= 10000 THEN '{"payment_id": 42, "status": "captured"}'::jsonb END, now(),
       CASE WHEN g > 10000 THEN now() + interval '12 hours' END,
       interval '12 hours', interval '30 days', now(), now(), now() + interval '30 days'
FROM generate_series(1, 11000) AS g;
VACUUM ANALYZE idempotency.requests;
SQL

echo "Postgres $("$PG_CONFIG" --version), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $clients clients, ${secs}s runs, $rounds rounds; base $base, head $(git -C "$repo" rev-parse --short HEAD)"
results=$work/results.txt
: > "$results"
for r in $(seq 1 "$rounds"); do
  order="old new"; [ $((r % 2)) = 0 ] && order="new old"
  for lib in $order; do
    stop; use "$lib"; start
    for script in replay active; do
      tps=$("$bindir/pgbench" -n -h "$work" -p "$port" -U postgres -M prepared -c "$clients" -j 2 -T "$secs" \
              -f "$repo/bench/scripts/$script.ext.sql" postgres 2>/dev/null |
            sed -n 's/^tps = \([0-9.]*\) .*/\1/p')
      echo "$r $lib $script $tps" | tee -a "$results"
    done
    # One backend, 300,000 replays in one statement: its CPU time (utime + stime, in clock
    # ticks), which a busy machine disturbs far less than throughput.
    for _ in 1 2 3; do
      ticks=$("${psql[@]}" -At <<'SQL' | awk '$1 == "T" { t[n++] = $2 } END { print t[1] - t[0] }'
SELECT pg_catalog.pg_backend_pid() AS pid \gset
\setenv IDEM_PID :pid
\! echo T $(awk '{ print $14 + $15 }' /proc/$IDEM_PID/stat)
SELECT count(*) FROM pg_catalog.generate_series(1, 300000) AS g
  CROSS JOIN LATERAL idem_claim('orders', (((g % 10000) + 1) * 2654435761 % 4294967311)::text,
    '9f2c1e0b7a6d5c4b3a29180716253443526170819fa0b1c2d3e4f5061728394a') AS c;
\! echo T $(awk '{ print $14 + $15 }' /proc/$IDEM_PID/stat)
SQL
)
      echo "$r $lib cpu_ticks $ticks" | tee -a "$results"
    done
  done
done
python3 - "$results" "$(getconf CLK_TCK)" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    _, lib, script, tps = line.split()
    runs.setdefault((script, lib), []).append(float(tps))
for script in ("replay", "active"):
    old, new = statistics.median(runs[(script, "old")]), statistics.median(runs[(script, "new")])
    print(f"pgbench {script}: base {old:,.0f} tps, wait => NULL {new:,.0f} tps (medians), ratio {new / old:.3f}")
tick = 1000 / int(sys.argv[2])
old, new = statistics.median(runs[("cpu_ticks", "old")]), statistics.median(runs[("cpu_ticks", "new")])
print(f"one backend, 300,000 replays, CPU time: base {old * tick:,.0f} ms, wait => NULL {new * tick:,.0f} ms "
      f"(medians of {len(runs[('cpu_ticks', 'new')])}), CPU ratio {new / old:.3f}")
PY
