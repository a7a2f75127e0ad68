#!/usr/bin/env bash
# Set up everything, start a throw-away Postgres with the extension preloaded, and run the
# demo (scripts/demo.sql). Safe to re-run: the previous demo cluster is replaced.
# Usage: scripts/demo.sh [MAJOR]   (default 15, Debian's Postgres)
set -euo pipefail
cd "$(dirname "$0")/.."
major=${1:-15}
port=${IDEM_DEMO_PORT:-54329}
dir=${IDEM_DEMO_DIR:-/tmp/idempotency-demo}

log() { printf '[demo] %s\n' "$*" >&2; }

pgrx-config/setup.sh "$major"
pg_config=$(sed -n "s/^pg$major = \"\(.*\)\"/\1/p" "${PGRX_HOME:-$HOME/.pgrx}/config.toml")
bindir=$("$pg_config" --bindir)

log "building and installing the extension into $("$pg_config" --pkglibdir)"
cargo pgrx install --pg-config "$pg_config" --features "pg$major" --no-default-features >/dev/null

as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

if [ -f "$dir/postmaster.pid" ]; then
  log "stopping the previous demo cluster"
  as_pg "$bindir/pg_ctl" -D "$dir" -m fast stop >/dev/null 2>&1 || true
fi
rm -rf "$dir"
mkdir -p "$dir"
[ "$(id -u)" = 0 ] && chown postgres: "$dir"
log "initdb $dir"
as_pg "$bindir/initdb" -A trust -U postgres -E UTF8 --locale=C -D "$dir" >/dev/null
cat > "$dir/postgresql.auto.conf" <<CONF
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
shared_preload_libraries = 'idempotency'
# Step 4 shows a stale lease taken over by a claim; keep the worker from reclaiming it first.
idempotency.reclaim_grace = '1min'
CONF
[ "$(id -u)" = 0 ] && chown postgres: "$dir/postgresql.auto.conf"
log "starting Postgres $major on port $port (stop it with: $bindir/pg_ctl -D $dir stop)"
# Without RUST_BACKTRACE: errors must read as they will in production.
as_pg env -u RUST_BACKTRACE "$bindir/pg_ctl" -w -D "$dir" -l "$dir/server.log" start >/dev/null
psql=("$bindir/psql" -X -q -h 127.0.0.1 -p "$port" -U postgres)
"${psql[@]}" -d postgres -c "CREATE DATABASE demo" >/dev/null
"${psql[@]}" -d demo -v ON_ERROR_STOP=1 -f scripts/demo.sql
log "done; connect with: ${psql[*]} -d demo"
