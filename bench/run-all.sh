#!/usr/bin/env bash
# The benchmark suite: the extension against the PL/pgSQL reference pattern and the bare-SQL
# floor, side by side in one run, on one throw-away cluster. Writes bench/results/report.md,
# results.csv and PNG plots. See docs/benchmarks.md.
#
# Usage: bench/run-all.sh [--quick] [options]
#   --quick             a few minutes: T=3s, sizes 0 and 100k, a small hash micro-benchmark
#   --duration N        seconds per pgbench step of the main matrix (default 12)
#   --size-duration N   seconds per step of the table-size series (default 12)
#   --clients LIST      client counts, e.g. 1,4,16 (default)
#   --sizes LIST        table sizes (filler rows), e.g. 0,1M,10M (default)
#   --size-clients LIST client counts of the table-size series (default 4)
#   --sync LIST         synchronous_commit series (default on,off)
#   --workloads LIST    new,replay,active,active_open,mixed,hash,call (default: all)
#   --rounds N          run every cell N times, contender order rotating; medians (default 1)
#   --hash-rows N       documents of the hash_vs_sha256.sql micro-benchmark (0: skip it)
#   --no-profile        skip the perf profiles (they need perf: Debian's linux-perf)
#   --no-build          use the extension already installed for PG_CONFIG
#   --keep              keep the cluster's data directory (WORK/data) after the run
#   --results DIR       where the report goes (default bench/results)
#   --report-only       rebuild report.md and the plots from DIR/results.csv
# Environment: PG_CONFIG (default /usr/lib/postgresql/15/bin/pg_config: the extension is
# built and installed there), PORT (default 28841), WORK (default /var/tmp/idem-bench-all).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bench=$repo/bench
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
port=${PORT:-28841}
work=${WORK:-/var/tmp/idem-bench-all}
results=$bench/results
quick=0 build=1 profile=1 report_only=0 keep=0
suite_args=()
t0=$SECONDS

log() { printf '[bench %4ss] %s\n' "$((SECONDS - t0))" "$*" >&2; }
die() { printf '[bench] ERROR: %s\n' "$*" >&2; exit 1; }

while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --duration | --size-duration | --clients | --sizes | --size-clients | --sync | --workloads | \
      --rounds | --hash-rows)
      [ $# -ge 2 ] || die "$1 needs a value"
      suite_args+=("$1" "$2"); shift ;;
    --no-profile) profile=0 ;;
    --no-build) build=0 ;;
    --keep) keep=1 ;;
    --results) [ $# -ge 2 ] || die "$1 needs a value"; results=$(realpath -m "$2"); shift ;;
    --report-only) report_only=1 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
  shift
done

# --- Python with matplotlib for the report (a venv under bench/.venv) ------------------------
venv=$bench/.venv
if ! "$venv/bin/python" -c 'import matplotlib' 2>/dev/null; then
  log "creating $venv with matplotlib (PyPI)"
  if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c 'import ensurepip' 2>/dev/null; then
    [ "$(id -u)" = 0 ] || die "python3-venv is missing (apt-get install python3-venv)"
    apt-get install -y -q python3-venv >/dev/null
  fi
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check matplotlib
fi
py=$venv/bin/python

if [ "$report_only" = 1 ]; then
  "$py" "$bench/report.py" --results "$results"
  exit 0
fi

# --- Postgres, the extension, perf --------------------------------------------------------------
if [ ! -x "$PG_CONFIG" ] || ! command -v cargo-pgrx >/dev/null 2>&1; then
  [ "$PG_CONFIG" = /usr/lib/postgresql/15/bin/pg_config ] ||
    [ -x "$PG_CONFIG" ] || die "PG_CONFIG=$PG_CONFIG does not exist"
  log "setting up Postgres 15 and cargo-pgrx (pgrx-config/setup.sh 15)"
  "$repo/pgrx-config/setup.sh" 15
fi
bindir=$("$PG_CONFIG" --bindir)
major=$("$PG_CONFIG" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
for tool in postgres initdb pg_ctl psql pgbench; do
  [ -x "$bindir/$tool" ] || die "$bindir/$tool is missing (Debian: apt-get install postgresql-$major)"
done
if [ "$build" = 1 ]; then
  log "building (release) and installing the extension into $("$PG_CONFIG" --pkglibdir)"
  (cd "$repo" && env -u RUST_BACKTRACE cargo pgrx install --release --pg-config "$PG_CONFIG" \
    --features "pg$major" --no-default-features >"$work.build.log" 2>&1) ||
    { tail -n 30 "$work.build.log" >&2; die "cargo pgrx install failed (log: $work.build.log)"; }
fi
if [ "$profile" = 1 ]; then
  if ! command -v perf >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    log "installing linux-perf (Debian) for the profiles"
    apt-get install -y -q linux-perf >/dev/null 2>&1 || true
  fi
  if command -v perf >/dev/null 2>&1 && perf stat -e cpu-clock true >/dev/null 2>&1; then
    suite_args+=(--profile)
  else
    log "perf is not usable here: no profiles (--no-profile to silence this)"
  fi
fi

# --- the throw-away cluster ---------------------------------------------------------------------
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
data=$work/data
stop() {
  if [ -f "$data/postmaster.pid" ]; then
    log "stopping the cluster"
    as_pg "$bindir/pg_ctl" -D "$data" -m fast -w stop >/dev/null 2>&1 || true
  fi
  # The 10M-row tables and their WAL are ~15 GB: gone unless --keep (pgbench output stays).
  if [ "$keep" = 0 ] && [ -d "$data" ]; then
    rm -rf "$data"
  fi
}
trap stop EXIT
trap 'exit 130' INT TERM
stop
rm -rf "$work"
mkdir -p "$work"
[ "$(id -u)" = 0 ] && chown postgres: "$work"
locale=C.UTF-8
locale -a 2>/dev/null | grep -qix 'c.utf-\?8' || locale=C
log "initdb $data (Postgres $("$PG_CONFIG" --version | cut -d' ' -f2))"
as_pg "$bindir/initdb" -D "$data" -A trust -U postgres -E UTF8 --locale="$locale" >/dev/null
cat >>"$data/postgresql.conf" <<CONF

# bench/run-all.sh
port = $port
listen_addresses = ''
unix_socket_directories = '$work'
shared_preload_libraries = 'idempotency'
max_connections = 100
shared_buffers = 1GB
fsync = on
synchronous_commit = on          # pgbench sessions set on or off (PGOPTIONS): two series
max_wal_size = 8GB               # no checkpoint inside a step: each step starts after one
checkpoint_timeout = 30min
log_checkpoints = on
CONF
as_pg env -u RUST_BACKTRACE "$bindir/pg_ctl" -D "$data" -l "$work/server.log" -w start >/dev/null
psql=("$bindir/psql" -X -q -h "$work" -p "$port" -U postgres)
"${psql[@]}" -d postgres -c "CREATE DATABASE bench" >/dev/null
log "schema, reference PL/pgSQL, floor table, fixtures and smoke checks (bench/setup.sql)"
"${psql[@]}" -d bench -v ON_ERROR_STOP=1 -f "$bench/setup.sql" >/dev/null

# --- run ------------------------------------------------------------------------------------------
mkdir -p "$results"
rm -rf "$results/profiles" "$results"/*.png "$results"/{results.csv,loads.csv,skipped.txt,hash_vs_sha256.txt,meta.json}
if [ "$quick" = 1 ]; then
  suite_args=(--duration 3 --size-duration 3 --sizes "0,100k" --hash-rows 10000 --hash-rounds 3
    --profile-duration 6 "${suite_args[@]}")
fi
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
"$py" - "$results/meta.json" "$PG_CONFIG" "$repo" "$quick" "$load_before" "${suite_args[@]}" <<'PY'
import json, os, subprocess, sys
path, pg_config, repo, quick, load, *args = sys.argv[1:]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
mem = next((int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal")), 0)
git = lambda *a: subprocess.run(["git", "-C", repo, *a], capture_output=True, text=True).stdout.strip()
json.dump({
    "postgres": subprocess.run([pg_config, "--version"], capture_output=True, text=True).stdout.strip(),
    "nproc": os.cpu_count(), "cpu": cpu, "mem_gb": round(mem / 1048576, 1),
    "kernel": os.uname().release, "commit": git("rev-parse", "--short", "HEAD"),
    "branch": git("rev-parse", "--abbrev-ref", "HEAD"),
    "dirty": bool(git("status", "--porcelain", "--", ".", ":!bench/results")),
    "quick": quick == "1", "load_before": load, "args": args,
    "started": subprocess.run(["date", "-Is"], capture_output=True, text=True).stdout.strip(),
}, open(path, "w"), indent=1)
PY
log "running the matrix (one line per step)"
"$py" "$bench/suite.py" --bindir "$bindir" --host "$work" --port "$port" --datadir "$data" \
  --work "$work" --results "$results" "${suite_args[@]}"
"$py" - "$results/meta.json" <<'PY'
import json, subprocess, sys
m = json.load(open(sys.argv[1]))
m["load_after"] = " ".join(open("/proc/loadavg").read().split()[:3])
m["finished"] = subprocess.run(["date", "-Is"], capture_output=True, text=True).stdout.strip()
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
cp "$work/server.log" "$results/server.log.tmp" 2>/dev/null || true
log "writing the report"
"$py" "$bench/report.py" --results "$results"
log "done: $results/report.md"
