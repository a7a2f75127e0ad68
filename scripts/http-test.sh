#!/usr/bin/env bash
# The HTTP layer's tests: start a throw-away Postgres MAJOR with the extension installed and
# preloaded, then run the Python adapter's tests (pytest, clients/python/tests), the Node
# adapter's tests (node:test, clients/node/test) and the exporter test (metrics/test_exporter.py),
# then the Python contract suites and Express 5's on the portable edition, then the adapter suites
# again with every app and adapter connecting through a real PgBouncer in transaction mode
# (IDEM_HTTP_POOLER; docs/http-frameworks.md, Hosted poolers), and stop the cluster. The Python adapter is tested as built: wheel + sdist, clean venv. Installs what it needs (apt, pip into a venv, npm) on a fresh Debian 12;
# a second run installs nothing. Ends with the plain line 'N passed, N failed'.
# Usage: scripts/http-test.sh [MAJOR]   (default 15)
# Environment: IDEM_HTTP_PORT (default 54339), IDEM_HTTP_DIR (default /tmp/idempotency-http-test),
#              IDEM_HTTP_POOLER_PORT (default IDEM_HTTP_PORT + 1: the PgBouncer pass),
#              IDEM_HTTP_CACHE (default ~/.cache/idempotency-http), IDEM_HTTP_KEEP=1 keeps
#              the cluster running afterwards, IDEM_HTTP_APP_PORT the first port of the
#              example apps the Python tests start (default: any free port).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
major=${1:-15}
port=${IDEM_HTTP_PORT:-54339}
dir=${IDEM_HTTP_DIR:-/tmp/idempotency-http-test}
export IDEM_HTTP_CACHE=${IDEM_HTTP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/idempotency-http}
t0=$SECONDS
log() { printf '[http-test %4ss] %s\n' "$((SECONDS - t0))" "$*" >&2; }

# --- what the tests need from Debian ----------------------------------------------------------
need=()
command -v prometheus-postgres-exporter >/dev/null || need+=(prometheus-postgres-exporter)
python3 -c 'import ensurepip, venv' 2>/dev/null || need+=(python3-venv)
command -v node >/dev/null || need+=(nodejs)
command -v npm >/dev/null || need+=(npm)
[ -x /usr/sbin/pgbouncer ] || command -v pgbouncer >/dev/null || need+=(pgbouncer)  # clients/python/tests/test_poolers.py
if [ ${#need[@]} -gt 0 ]; then
  log "apt-get install ${need[*]}"
  apt-get update -qq
  # The exporter's package starts no service here: policy-rc.d keeps it so where one exists.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# --- Postgres and the extension ----------------------------------------------------------------
pgrx-config/setup.sh "$major"
pg_config=$(sed -n "s/^pg$major = \"\(.*\)\"/\1/p" "${PGRX_HOME:-$HOME/.pgrx}/config.toml")
bindir=$("$pg_config" --bindir)
log "building and installing the extension into $("$pg_config" --pkglibdir)"
cargo pgrx install --pg-config "$pg_config" --features "pg$major" --no-default-features >/dev/null

as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
bport=${IDEM_HTTP_POOLER_PORT:-$((port + 1))}
bdir=$dir-pgbouncer
stop_cluster() {
  [ -f "$bdir/pgbouncer.pid" ] && kill "$(cat "$bdir/pgbouncer.pid")" 2>/dev/null || true
  [ -f "$dir/postmaster.pid" ] && as_pg "$bindir/pg_ctl" -D "$dir" -m fast stop >/dev/null 2>&1 || true
}
stop_cluster
rm -rf "$dir"
mkdir -p "$dir"
[ "$(id -u)" = 0 ] && chown postgres: "$dir"
as_pg "$bindir/initdb" -A trust -U postgres -E UTF8 --locale=C -D "$dir" >/dev/null
cat > "$dir/postgresql.auto.conf" <<CONF
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
shared_preload_libraries = 'idempotency'
max_connections = 200
CONF
[ "$(id -u)" = 0 ] && chown postgres: "$dir/postgresql.auto.conf"
[ "${IDEM_HTTP_KEEP:-}" = 1 ] || trap stop_cluster EXIT
log "starting Postgres $major on port $port"
as_pg env -u RUST_BACKTRACE "$bindir/pg_ctl" -w -D "$dir" -l "$dir/server.log" start >/dev/null
"$bindir/psql" -X -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -c "CREATE DATABASE http" >/dev/null
"$bindir/psql" -X -q -h 127.0.0.1 -p "$port" -U postgres -d http -c "CREATE EXTENSION idempotency" >/dev/null
export DATABASE_URL="postgresql://postgres@127.0.0.1:$port/http"

# PgBouncer in transaction mode in front of every database of the cluster, for the second pass:
# 8 server connections, all opened (min_pool_size) and handed out round robin, so even one
# client's consecutive transactions run on different server sessions (with one open, a prepared
# statement would always find its session). postgres may read its admin console (SHOW STATS).
rm -rf "$bdir" && mkdir -p "$bdir"
echo '"postgres" ""' > "$bdir/users.txt"
cat > "$bdir/pgbouncer.ini" <<INI
[databases]
* = host=127.0.0.1 port=$port
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $bport
unix_socket_dir =
auth_type = trust
auth_file = $bdir/users.txt
pool_mode = transaction
default_pool_size = 8
min_pool_size = 8
server_round_robin = 1
admin_users = postgres
max_client_conn = 500
ignore_startup_parameters = extra_float_digits,options
logfile = $bdir/pgbouncer.log
log_connections = 0
log_disconnections = 0
pidfile = $bdir/pgbouncer.pid
INI
[ "$(id -u)" = 0 ] && chown -R postgres: "$bdir"
pgbouncer=$(command -v pgbouncer || echo /usr/sbin/pgbouncer)
# Its port can be taken (a CI run found 54340 bound by another socket): then a free one.
for try in 1 2 3; do
  as_pg "$pgbouncer" -d "$bdir/pgbouncer.ini"  # pgbouncer refuses to run as root
  up=
  for _ in $(seq 100); do
    "$bindir/psql" -X -q -h 127.0.0.1 -p "$bport" -U postgres -d http -c "SELECT 1" >/dev/null 2>&1 && { up=1; break; }
    sleep 0.2
  done
  [ -n "$up" ] && break
  [ -f "$bdir/pgbouncer.pid" ] && kill "$(cat "$bdir/pgbouncer.pid")" 2>/dev/null || true
  [ "$try" = 3 ] && { tail -3 "$bdir/pgbouncer.log" >&2; echo "http-test: PgBouncer does not start" >&2; exit 1; }
  bport=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  sed -i "s/^listen_port = .*/listen_port = $bport/" "$bdir/pgbouncer.ini"
done
pooler=127.0.0.1:$bport

# --- Python: the adapter's wheel and sdist, installed into a clean venv -----------------------
# Built from a copy of clients/python (the tree stays clean); the tests import the adapter
# from the venv only (conftest.py drops PYTHONPATH), so they test the artifact users install.
pydir=$dir-python
rm -rf "$pydir"
mkdir -p "$pydir"
cp -r clients/python "$pydir/src"
rm -rf "$pydir/src/tests" "$pydir/src/build" "$pydir/src/dist"
venv=$pydir/venv
log "python -m build (wheel and sdist) and a clean venv"
python3 -m venv "$venv"
pip_q() { "$venv/bin/pip" install -q --disable-pip-version-check "$@" >&2; }
pip_q build
"$venv/bin/python" -m build --outdir "$pydir/dist" "$pydir/src" >/dev/null
wheel=$(ls "$pydir"/dist/idempotency_http-*.whl)
ls "$pydir"/dist/idempotency_http-*.tar.gz >/dev/null
pip_q "$wheel[fastapi,flask,django,sqlalchemy,flask-sqlalchemy,sqlmodel]" "psycopg[binary]>=3.1" "uvicorn>=0.30" "pytest>=8" "httpx>=0.27" \
  "djangorestframework>=3.14"
"$venv/bin/python" - <<'PY'
import importlib.resources, idempotency_http
assert "site-packages" in idempotency_http.__file__, idempotency_http.__file__
assert importlib.resources.files("idempotency_http").joinpath("py.typed").is_file()
PY

# --- Node: the adapter from its npm pack tarball, in clean projects for Express 4 and 5 ---------
node_cache=$IDEM_HTTP_CACHE/node
mkdir -p "$node_cache"
if [ ! -d clients/node/node_modules/typescript ] || [ clients/node/package.json -nt clients/node/node_modules/.package-lock.json ]; then
  log "npm install (clients/node: the tests' tools)"
  (cd clients/node && npm install --no-audit --no-fund --loglevel=error --include=dev >&2)
fi
# The Node suites plant look-alike functions: they get a database of their own.
"$bindir/psql" -X -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -c "CREATE DATABASE http_node" >/dev/null
"$bindir/psql" -X -q -h 127.0.0.1 -p "$port" -U postgres -d http_node -c "CREATE EXTENSION idempotency" >/dev/null
node_db="postgresql://postgres@127.0.0.1:$port/http_node"
tarball=$node_cache/$(cd clients/node && npm pack --silent --pack-destination "$node_cache" | tail -1)
for em in 4 5; do
  proj=$node_cache/express$em
  stamp=$(cat "$tarball" | sha256sum | cut -c1-16)
  if [ "$(cat "$proj/.stamp" 2>/dev/null)" != "$stamp" ]; then
    log "npm install express@$em and $(basename "$tarball") into a clean $proj"
    rm -rf "$proj" && mkdir -p "$proj"
    printf '{"name": "idem-express%s-test", "private": true, "type": "module"}\n' "$em" > "$proj/package.json"
    (cd "$proj" && npm install --no-audit --no-fund --loglevel=error "express@$em" "pg@8" "@types/express@$em" \
      "@types/node@20" "@types/pg@8" "$tarball" >&2)
    echo "$stamp" > "$proj/.stamp"
  fi
done

passed=0 failed=0
# junit report -> "passed failed" on stdout; per framework (the [fastapi]/[flask]/[django] of a
# parametrized test, or its file) on stderr.
py_count() {
  "$venv/bin/python" - "$1" <<'PY'
import re, sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
rows, total = {}, [0, 0]
for case in root.iter("testcase"):
    bad = case.find("failure") is not None or case.find("error") is not None
    if case.find("skipped") is not None:
        continue
    name, cls = case.get("name", ""), case.get("classname", "")
    m = re.search(r"\b(fastapi|flask|django)\b", name) or re.search(r"test_(fastapi)$", cls)
    fw = m.group(1) if m else cls.rsplit(".", 1)[-1]
    row = rows.setdefault(fw, [0, 0])
    row[bad] += 1
    total[bad] += 1
for fw, (p, f) in sorted(rows.items()):
    print(f"  {fw:24} {p:4} passed, {f} failed", file=sys.stderr)
print(total[0], total[1])
PY
}
log "Python adapter tests (pytest, through uvicorn and werkzeug servers)"
py_report=$pydir/report.xml
export IDEM_HTTP_FIGURES=$pydir/figures.txt
(cd "$pydir" && "$venv/bin/python" -m pytest -p no:cacheprovider -q -rf --junitxml="$py_report" \
  "$root/clients/python/tests") || true
read -r p f < <(py_count "$py_report") || { p=0; f=1; }
passed=$((passed + p)) failed=$((failed + f))
[ -f "$IDEM_HTTP_FIGURES" ] && sed 's/^/  /' "$IDEM_HTTP_FIGURES" >&2

log "exporter test (pytest)"
ex_report=$pydir/exporter.xml
"$venv/bin/python" -m pytest -p no:cacheprovider -q -rf --junitxml="$ex_report" metrics/test_exporter.py || true
read -r p f < <(py_count "$ex_report") || { p=0; f=1; }
passed=$((passed + p)) failed=$((failed + f))

# node_suite LABEL ENV... -- FILES...: one node:test run, added to the totals.
node_suite() {
  local label=$1 out envs=() p f; shift
  while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  log "Node: $label (node:test)"
  out=$(mktemp)
  (cd clients/node && env "${envs[@]}" node --test --test-concurrency=1 --test-reporter=spec \
    --test-reporter-destination=stdout --test-reporter=tap --test-reporter-destination="$out" "$@") || true
  p=$(sed -n 's/^# pass \([0-9]*\)$/\1/p' "$out" | tail -1)
  f=$(sed -n 's/^# fail \([0-9]*\)$/\1/p' "$out" | tail -1)
  rm -f "$out"
  [ -n "$p" ] || { p=0; f=1; }
  log "Node: $label: $p passed, ${f:-1} failed"
  passed=$((passed + p)) failed=$((failed + ${f:-1}))
}
node_suite "unit and example service" DATABASE_URL="$node_db" IDEM_NODE_TARBALL="$tarball" -- \
  test/keys.test.js test/schema.test.js test/http.test.js
node_suite "Express 5 behind PgBouncer (transaction mode)" DATABASE_URL="$node_db" IDEM_NODE_PROJECT="$node_cache/express5" \
  EXPRESS_MAJOR=5 -- test/pooler.test.js
for em in 4 5; do
  node_suite "Express $em contract and tsc" DATABASE_URL="$node_db" IDEM_NODE_PROJECT="$node_cache/express$em" EXPRESS_MAJOR=$em -- \
    test/contract-requests.test.js test/contract-responses.test.js test/contract-concurrency.test.js test/contract-scope.test.js \
    test/plain-script.test.js test/types.test.js
done

# --- the same contract on the portable edition (docs/managed.md): its plain script in databases
# of its own (Python's, and Node's, where look-alikes are planted); no pg_extension row there, so
# the apps are told the functions' schema (IDEM_EXAMPLE_SCHEMA).
portable_url=postgresql://postgres@127.0.0.1:$port
for db in http_portable http_portable_node; do
  "$bindir/psql" -X -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -c "CREATE DATABASE $db" >/dev/null
  scripts/portable.sh | "$bindir/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres -d "$db" -f - >/dev/null
done
log "Python adapter contract tests on the portable edition (pytest)"
pp_report=$pydir/portable.xml
(cd "$pydir" && DATABASE_URL="$portable_url/http_portable" IDEM_EXAMPLE_SCHEMA=public "$venv/bin/python" -m pytest \
  -p no:cacheprovider -q -rf --junitxml="$pp_report" "$root/clients/python/tests/test_contract.py" \
  "$root/clients/python/tests/test_contract_http.py") || true
read -r p f < <(py_count "$pp_report") || { p=0; f=1; }
passed=$((passed + p)) failed=$((failed + f))
node_suite "Express 5 contract on the portable edition" DATABASE_URL="$portable_url/http_portable_node" \
  IDEM_EXAMPLE_SCHEMA=public IDEM_NODE_PROJECT="$node_cache/express5" EXPRESS_MAJOR=5 -- \
  test/contract-requests.test.js test/contract-responses.test.js test/contract-concurrency.test.js test/contract-scope.test.js \
  test/pooler.test.js

# --- the adapter suites again, every app and adapter through PgBouncer (transaction mode) ---------
# The tests' own checks stay direct (pg_locks, counts, gates). Not repeated: test_poolers.py and
# pooler.test.js (their own PgBouncer), test_contract.py (SQL only, no app), test_keys.py,
# keys.test.js and types.test.js (no database), Express 4 (the same adapter code as Express 5).
log "Python adapter tests through PgBouncer in transaction mode (pytest)"
pb_report=$pydir/pgbouncer.xml
(cd "$pydir" && IDEM_HTTP_POOLER=$pooler IDEM_EXAMPLE_NO_PREPARE=1 IDEM_HTTP_FIGURES=$pydir/figures-pgbouncer.txt \
  "$venv/bin/python" -m pytest -p no:cacheprovider -q -rf --junitxml="$pb_report" "$root/clients/python/tests" \
  --ignore="$root/clients/python/tests/test_poolers.py" --ignore="$root/clients/python/tests/test_contract.py" \
  --ignore="$root/clients/python/tests/test_keys.py") || true
read -r p f < <(py_count "$pb_report") || { p=0; f=1; }
passed=$((passed + p)) failed=$((failed + f))
[ -f "$pydir/figures-pgbouncer.txt" ] && sed 's/^/  (pgbouncer) /' "$pydir/figures-pgbouncer.txt" >&2
node_suite "example service and schema through PgBouncer" DATABASE_URL="$node_db" IDEM_HTTP_POOLER="$pooler" \
  IDEM_NODE_TARBALL="$tarball" -- test/schema.test.js test/http.test.js
node_suite "Express 5 contract through PgBouncer" DATABASE_URL="$node_db" IDEM_HTTP_POOLER="$pooler" \
  IDEM_NODE_PROJECT="$node_cache/express5" EXPRESS_MAJOR=5 -- \
  test/contract-requests.test.js test/contract-responses.test.js test/contract-concurrency.test.js test/contract-scope.test.js \
  test/plain-script.test.js

log "done in $((SECONDS - t0)) s"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
