#!/usr/bin/env bash
# Runs bench/hash_vs_sha256.sql against a release build of the extension in a throwaway
# Postgres cluster (private port and socket directory), without installing anything
# system-wide: the functions are created from the packaged library by absolute path.
# Usage: bench/run.sh [rows=100000] [rounds=5]      (PG_CONFIG, PORT, WORK override defaults)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
rows=${1:-100000}
rounds=${2:-5}
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
bindir=$("$PG_CONFIG" --bindir)
major=$("$PG_CONFIG" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
port=${PORT:-28815}
work=${WORK:-/var/tmp/idem-bench-$$}

(cd "$repo" && env -u RUST_BACKTRACE cargo pgrx package --pg-config "$PG_CONFIG" >&2)
pkg="$repo/target/release/idempotency-pg$major"
so=$(find "$pkg" -name 'idempotency.so' | head -n 1)
sql=$(find "$pkg" -name 'idempotency--*.sql' | head -n 1)

# initdb and postgres refuse to run as root.
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
mkdir -p "$work"
if [ "$(id -u)" = 0 ]; then chown postgres "$work"; fi
stop() {
  as_pg "$bindir/pg_ctl" -D "$work/data" -m fast stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap stop EXIT
locale=C.UTF-8
locale -a | grep -qix 'c.utf-\?8' || locale=C
as_pg "$bindir/initdb" -D "$work/data" -A trust -U postgres -E UTF8 --locale="$locale" >/dev/null
as_pg env -u RUST_BACKTRACE "$bindir/pg_ctl" -D "$work/data" -l "$work/log" -w \
  -o "-p $port -k $work -c listen_addresses= -c shared_buffers=256MB" start >/dev/null
psql=("$bindir/psql" -X -q -h "$work" -p "$port" -U postgres -d postgres)

# Not CREATE EXTENSION: the script's extension-only bits are adapted (@extschema@ -> public,
# no pg_extension_config_dump).
sed -e "s|MODULE_PATHNAME|${so%.so}|g" -e 's|@extschema@|public|g' \
  -e '/pg_extension_config_dump/d' -e '/^\\echo/d' -e '/^\\quit/d' "$sql" |
  "${psql[@]}" -v ON_ERROR_STOP=1 >/dev/null
echo "Postgres $("$PG_CONFIG" --version), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); rows=$rows rounds=$rounds"
"${psql[@]}" -v rows="$rows" -v rounds="$rounds" -f "$repo/bench/hash_vs_sha256.sql"
