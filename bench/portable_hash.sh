#!/usr/bin/env bash
# idem_hash and idem_lock_key: the native extension, the portable edition (scripts/portable.sh --pure)
# and what the seed's PL/pgSQL page does for a request hash (bench/scripts/hash.ref.sql: sha256
# of jsonb's text, not canonical), in one run: a throwaway cluster, database `native` with the
# extension, database `portable` with the script, the ~1 KB order documents of
# bench/hash_vs_sha256.sql in both, rounds alternating, median microseconds per call.
# Usage: bench/portable_hash.sh PG_CONFIG [rows=2000] [rounds=5]   (PORT, WORK override)
# The extension must be installed in that Postgres (cargo pgrx install --pg-config ...).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
PG_CONFIG=${1:?usage: bench/portable_hash.sh PG_CONFIG [rows] [rounds]}
rows=${2:-2000}
rounds=${3:-5}
bindir=$("$PG_CONFIG" --bindir)
port=${PORT:-55310}
work=${WORK:-/var/tmp/idem-portable-hash-$$}

as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
mkdir -p "$work"
if [ "$(id -u)" = 0 ]; then chown postgres "$work"; fi
stop() {
  as_pg "$bindir/pg_ctl" -D "$work/data" -m fast stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap stop EXIT
as_pg "$bindir/initdb" -D "$work/data" -A trust -U postgres -E UTF8 --locale=C >/dev/null
as_pg env -u RUST_BACKTRACE "$bindir/pg_ctl" -D "$work/data" -l "$work/log" -w \
  -o "-p $port -k $work -c listen_addresses= -c shared_preload_libraries=idempotency" start >/dev/null
psql() { "$bindir/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$work" -p "$port" -U postgres "$@"; }

# The documents of bench/hash_vs_sha256.sql (its CREATE TABLE ... AS SELECT).
docs=$(sed -n '/^CREATE TABLE idem_bench_orders AS/,/^FROM generate_series/p' "$repo/bench/hash_vs_sha256.sql" |
  sed "s/:rows/$rows/")
timer="CREATE FUNCTION bench_us(q text, n int) RETURNS numeric LANGUAGE plpgsql AS \$\$
  DECLARE t0 timestamptz := clock_timestamp();
  BEGIN EXECUTE q; RETURN round((extract(epoch FROM clock_timestamp() - t0) * 1e6 / n)::numeric, 1); END \$\$;
  SET max_parallel_workers_per_gather = 0; SET jit = off;"
for db in native portable; do
  psql -d postgres -c "CREATE DATABASE $db"
  psql -d "$db" -c "$docs" -c "$timer"
done
psql -d native -c "CREATE EXTENSION idempotency"
"$repo/scripts/portable.sh" --pure | psql -d portable -c "CREATE SCHEMA idempotency" -f -

# name | database | statement over idem_bench_orders (one call per row)
workloads=(
  "hash.native|native|SELECT count(public.idem_hash(doc)) FROM idem_bench_orders"
  "hash.portable|portable|SELECT count(idempotency.idem_hash(doc)) FROM idem_bench_orders"
  "hash.page|portable|SELECT count(encode(sha256(convert_to(doc::text, 'UTF8')), 'hex')) FROM idem_bench_orders"
  "lock_key.native|native|SELECT count(public.idem_lock_key('payments', 'order-' || id)) FROM idem_bench_orders"
  "lock_key.portable|portable|SELECT count(idempotency.idem_lock_key('payments', 'order-' || id)) FROM idem_bench_orders"
)
echo "Postgres $("$PG_CONFIG" --version), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); rows=$rows rounds=$rounds"
results=$work/results
: >"$results"
for round in $(seq 1 "$rounds"); do
  for w in "${workloads[@]}"; do
    IFS='|' read -r name db sql <<<"$w"
    us=$(psql -d "$db" -c "SET max_parallel_workers_per_gather = 0" -c "SET jit = off" \
      -c "SELECT bench_us(\$q\$$sql\$q\$, $rows)")
    echo "$name $us" >>"$results"
  done
done
median() { grep "^$1 " "$results" | awk '{print $2}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
hn=$(median hash.native); hp=$(median hash.portable); hr=$(median hash.page)
ln=$(median lock_key.native); lp=$(median lock_key.portable)
printf '%-34s %10s\n' "median us per call" "us"
printf '%-34s %10s\n' "idem_hash, native" "$hn" "idem_hash, portable" "$hp" \
  "sha256(jsonb::text), the page" "$hr" "idem_lock_key, native" "$ln" "idem_lock_key, portable" "$lp"
awk -v hn="$hn" -v hp="$hp" -v hr="$hr" -v ln="$ln" -v lp="$lp" 'BEGIN {
  printf "portable / native idem_hash:      %.1f\n", hp / hn
  printf "portable idem_hash / page sha256: %.1f\n", hp / hr
  printf "portable / native idem_lock_key:  %.1f\n", lp / ln }'
