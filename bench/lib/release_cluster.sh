# Shared by bench/purge.sh and bench/retention.sh: a release build of the extension in a
# private, relocated copy of Postgres MAJOR (other test runs may overwrite the shared one while
# we measure), and a throw-away cluster on PORT in WORK with the library preloaded, the worker
# off and EXTRA_CONF appended; stopped when the calling script exits. Sets $bindir.
# Needs: major, port, work, batch, sync_commit; optional extra_conf.
log() { printf '[bench] %s\n' "$*" >&2; }
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

config="${PGRX_HOME:-$HOME/.pgrx}/config.toml"
pg_config=$(sed -n "s/^pg$major = \"\(.*\)\"/\1/p" "$config" 2>/dev/null || true)
if [ -z "$pg_config" ]; then
  pgrx-config/setup.sh "$major"
  pg_config=$(sed -n "s/^pg$major = \"\(.*\)\"/\1/p" "$config")
fi

log "release build (cargo pgrx package; slow on a busy machine: LTO)"
cargo pgrx package --pg-config "$pg_config" --features "pg$major" --no-default-features >/dev/null
staged="${CARGO_TARGET_DIR:-target}/release/idempotency-pg$major"

# A relocated copy of the installation: Postgres finds share/ and lib/ relative to bin/.
root="$work/pg"
if [ -f "$work/data/postmaster.pid" ] && [ -x "$root$("$pg_config" --bindir)/pg_ctl" ]; then
  as_pg "$root$("$pg_config" --bindir)/pg_ctl" -D "$work/data" -m immediate stop >/dev/null 2>&1 || true
fi
rm -rf "$work"
for d in bindir pkglibdir sharedir; do
  src=$("$pg_config" --$d)
  mkdir -p "$root$src"
  cp -a "$src/." "$root$src/"
done
cp -a "$staged/." "$root/"
bindir="$root$("$pg_config" --bindir)"

mkdir -p "$work/data"
[ "$(id -u)" = 0 ] && chown -R postgres: "$work"
as_pg "$bindir/initdb" -A trust -U postgres -E UTF8 --locale=C --no-sync -D "$work/data" >/dev/null
cat >> "$work/data/postgresql.auto.conf" <<CONF
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$work/data'
shared_preload_libraries = 'idempotency'
max_connections = 50
shared_buffers = '512MB'
max_wal_size = '4GB'
idempotency.worker_enabled = off
idempotency.naptime = '100ms'
idempotency.batch_size = $batch
synchronous_commit = $sync_commit
${extra_conf:-}
CONF
log "starting Postgres $major on port $port"
as_pg env -u RUST_BACKTRACE "$bindir/pg_ctl" -w -D "$work/data" -l "$work/server.log" start >/dev/null
trap 'as_pg "$bindir/pg_ctl" -D "$work/data" -m fast stop >/dev/null 2>&1 || true' EXIT

