#!/usr/bin/env bash
# Before/after: the same pgbench workloads against release builds of two commits, side by side
# in one run. Both builds serve one throw-away cluster in turn (the library is swapped and the
# server restarted between steps), in ABBA order per round, so drift and noise fall on both.
# Reports each workload's median throughput per build and the ratio B/A, and the median server
# CPU per transaction: the user + system time of the server processes that exited during the
# step (the pgbench backends, any autovacuum worker), which the postmaster sums as it reaps
# them. On a shared machine throughput follows the other load; CPU time per transaction much
# less so.
#
# Usage: bench/compare-builds.sh REV_A REV_B [rounds=3] [seconds=10] [clients=4]
#   e.g. bench/compare-builds.sh 64a1e81 HEAD
# Environment: PG_CONFIG (default: Postgres 16 from pgrx-config/setup.sh, copied privately so
# that nothing system-wide is touched), WORK (default /var/tmp/idem-compare), PORT (28816),
# WORKLOADS (default "replay new"), SYNC (synchronous_commit, default off).
# Both commits must install the same SQL objects (the script of each is installed with it).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
rev_a=${1:?REV_A}
rev_b=${2:?REV_B}
rounds=${3:-3}
seconds=${4:-10}
clients=${5:-4}
PG_CONFIG=${PG_CONFIG:-/opt/idempotency-pg/16/bin/pg_config}
WORK=${WORK:-/var/tmp/idem-compare}
PORT=${PORT:-28816}
WORKLOADS=${WORKLOADS:-replay new}
SYNC=${SYNC:-off}
major=$("$PG_CONFIG" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')

log() { printf '[compare %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

mkdir -p "$WORK"
# A private copy of the installation: the library can be swapped without touching the one
# that tests use.
pg="$WORK/pg$major"
if [ ! -x "$pg/bin/postgres" ]; then
  log "copying $(dirname "$(dirname "$PG_CONFIG")") to $pg"
  cp -a "$(dirname "$(dirname "$PG_CONFIG")")" "$pg"
fi
pkglib=$("$pg/bin/pg_config" --pkglibdir)
share=$("$pg/bin/pg_config" --sharedir)/extension

build() { # REV -> $WORK/build-REV/{idempotency.so,*.sql,*.control}
  local rev=$1 sha out src
  sha=$(git -C "$repo" rev-parse --short "$rev")
  out="$WORK/build-$sha"
  if [ -f "$out/idempotency.so" ]; then echo "$out"; return; fi
  src="$WORK/src-$sha"
  rm -rf "$src"
  git -C "$repo" worktree add -q --detach "$src" "$sha"
  log "building $sha (release, pg$major)"
  (cd "$src" && CARGO_TARGET_DIR="$WORK/target" env -u RUST_BACKTRACE \
    cargo pgrx package --pg-config "$PG_CONFIG" >"$WORK/build-$sha.log" 2>&1) ||
    { tail -n 30 "$WORK/build-$sha.log" >&2; exit 1; }
  mkdir -p "$out"
  find "$WORK/target/release/idempotency-pg$major" \( -name 'idempotency.so' -o -name 'idempotency*.sql' \
    -o -name 'idempotency.control' \) -exec cp {} "$out/" \;
  git -C "$repo" worktree remove --force "$src"
  echo "$out"
}

a=$(build "$rev_a")
b=$(build "$rev_b")

use() { # BUILD_DIR
  cp "$1"/idempotency.so "$pkglib/"
  cp "$1"/idempotency*.sql "$1"/idempotency.control "$share/"
}

data="$WORK/data"
stop() { as_pg "$pg/bin/pg_ctl" -D "$data" -m fast stop >/dev/null 2>&1 || true; }
trap stop EXIT
stop
rm -rf "$data"
install -d -o postgres "$data"
as_pg "$pg/bin/initdb" -D "$data" -A trust -U postgres -E UTF8 --locale=C >/dev/null
cat >>"$data/postgresql.conf" <<EOF
port = $PORT
listen_addresses = ''
unix_socket_directories = '$WORK'
shared_preload_libraries = 'idempotency'
shared_buffers = 256MB
synchronous_commit = $SYNC
idempotency.worker_enabled = off
EOF
chown postgres "$data/postgresql.conf" "$WORK"
start() { as_pg env -u RUST_BACKTRACE "$pg/bin/pg_ctl" -D "$data" -l "$WORK/server.log" -w start >/dev/null; }
# CPU time of the postmaster's reaped children (cutime + cstime), in clock ticks.
reaped() { awk '{print $16 + $17}' "/proc/$(head -1 "$data/postmaster.pid")/stat"; }
psql=("$pg/bin/psql" -X -q -h "$WORK" -p "$PORT" -U postgres)

use "$b"
start
"${psql[@]}" -d postgres -c 'CREATE DATABASE bench' >/dev/null
"${psql[@]}" -d bench -v ON_ERROR_STOP=1 -f "$repo/bench/setup.sql" >/dev/null

results="$WORK/results.tsv"
: >"$results"
for round in $(seq 1 "$rounds"); do
  if [ $((round % 2)) = 1 ]; then order="a b b a"; else order="b a a b"; fi
  for which in $order; do
    dir=$a
    [ "$which" = b ] && dir=$b
    stop
    use "$dir"
    start
    for w in $WORKLOADS; do
      before=$(reaped)
      out=$("$pg/bin/pgbench" -n -M prepared -h "$WORK" -p "$PORT" -U postgres -c "$clients" \
        -j 2 -T "$seconds" -f "$repo/bench/scripts/$w.ext.sql" bench 2>&1)
      tps=$(sed -nE 's/^tps = ([0-9.]+).*/\1/p' <<<"$out")
      done_n=$(sed -nE 's/^number of transactions actually processed: ([0-9]+).*/\1/p' <<<"$out")
      sleep 1 # the backends exit and are reaped
      cpu=$(python3 -c "print(round(($(reaped) - $before) * 1e6 / $(getconf CLK_TCK) / $done_n, 1))")
      printf '%s\t%s\t%s\t%s\t%s\n' "$round" "$which" "$w" "$tps" "$cpu" >>"$results"
      log "round $round build $which $w: $tps tps, $cpu us server CPU per transaction"
    done
  done
done

echo "Postgres $("$pg/bin/pg_config" --version), $(nproc) cores, $clients clients, ${seconds}s steps, $rounds rounds (ABBA), synchronous_commit=$SYNC"
echo "A = $(git -C "$repo" rev-parse --short "$rev_a"), B = $(git -C "$repo" rev-parse --short "$rev_b")"
python3 - "$results" <<'EOF'
import statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().split("\n") if l]
print("| workload | A median tps | B median tps | B/A | A µs CPU/txn | B µs CPU/txn | B/A |")
print("|---|---:|---:|---:|---:|---:|---:|")
for w in dict.fromkeys(r[2] for r in rows):
    med = {(x, c): statistics.median(float(r[c]) for r in rows if r[1] == x and r[2] == w)
           for x in "ab" for c in (3, 4)}
    print(f"| {w} | {med['a', 3]:.0f} | {med['b', 3]:.0f} | {med['b', 3] / med['a', 3]:.3f} "
          f"| {med['a', 4]:.1f} | {med['b', 4]:.1f} | {med['b', 4] / med['a', 4]:.3f} |")
EOF
