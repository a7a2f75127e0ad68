#!/usr/bin/env bash
# Installs the Debian package (scripts/package.sh) with `dpkg -i` on a Debian Postgres that
# has never seen a source build, then runs CREATE EXTENSION, the demo (scripts/demo.sql) and a
# smoke test, and removes the package again with `dpkg -r`; then installs the tarball with its
# install.sh on the same pristine Postgres and runs CREATE EXTENSION there.
#
# Usage: scripts/package-test.sh [MAJOR]   (default 15; needs root and Debian's postgresql-MAJOR
#        installed with apt; builds target/packages/postgresql-MAJOR-idempotency_*.deb if missing)
#
# "Never seen a source build": the machine's own /usr/lib/postgresql/MAJOR is where
# `cargo pgrx test pgMAJOR` installs its test build, so it cannot be trusted (nor clobbered:
# others test there). So the test runs in a private mount namespace (unshare --mount) in which
# /usr/lib/postgresql/MAJOR/lib and /usr/share/postgresql/MAJOR/extension (the two directories
# a source build installs into) are the files of Debian's own postgresql-MAJOR package
# (apt-get download of the installed version, dpkg-deb -x), and /var/lib/dpkg is a copy of the
# real one. dpkg -i, the server and psql all run on those; when
# the namespace ends, nothing of it is left on the machine. Every run starts from the package.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
major=${1:-15}
major=${major#pg}
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
arch=$(dpkg --print-architecture)
deb=${CARGO_TARGET_DIR:-$repo/target}/packages/postgresql-$major-idempotency_${version}_$arch.deb
log() { printf '[package-test] %s\n' "$*" >&2; }
fail() { log "FAILED: $*"; exit 1; }

if [ "${IDEM_PKGTEST_INSIDE:-}" != 1 ]; then
  [ "$(id -u)" = 0 ] || fail "run as root (dpkg -i, mount namespaces)"
  pgver=$(dpkg-query -W -f='${Version}' "postgresql-$major" 2>/dev/null) ||
    fail "Debian's postgresql-$major is not installed (apt-get install postgresql-$major)"
  [ -f "$deb" ] && [ -f "${deb%/*}/idempotency-$version-pg$major-linux-$arch.tar.gz" ] ||
    { log "building the packages"; scripts/package.sh "$major"; }
  work=$(mktemp -d /tmp/idem-pkgtest-XXXXXX)
  chmod 0755 "$work"
  trap 'rm -rf "$work"' EXIT
  log "Debian's postgresql-$major $pgver, files only (apt-get download, dpkg-deb -x)"
  (cd "$work" && apt-get download -q "postgresql-$major=$pgver" >/dev/null 2>&1) ||
    fail "apt-get download postgresql-$major=$pgver"
  dpkg-deb -x "$work"/postgresql-"$major"_*.deb "$work/pristine"
  t0=$SECONDS
  IDEM_PKGTEST_INSIDE=1 IDEM_PKGTEST_WORK=$work \
    unshare --mount --propagation private "$0" "$major"
  # The machine's own dpkg database never saw the package.
  if dpkg-query -W "postgresql-$major-idempotency" >/dev/null 2>&1; then
    fail "postgresql-$major-idempotency leaked into the machine's dpkg database"
  fi
  log "PASSED in $((SECONDS - t0))s: dpkg -i, CREATE EXTENSION, demo, smoke test, dpkg -r, tarball (PostgreSQL $major)"
  exit 0
fi

# ---- inside the private mount namespace ----
work=$IDEM_PKGTEST_WORK
lib=/usr/lib/postgresql/$major
share=/usr/share/postgresql/$major
# Where a source build installs (pg_config --pkglibdir, --sharedir/extension): Debian's files.
# bin/ (server and psql, from postgresql-MAJOR and postgresql-client-MAJOR) stays the machine's.
mount --bind "$work/pristine$lib/lib" "$lib/lib"
mount --bind "$work/pristine$share/extension" "$share/extension"
# dpkg's database, and what postgresql-common's trigger rebuilds, are private copies too.
cp -a /var/lib/dpkg "$work/dpkg"
mount --bind "$work/dpkg" /var/lib/dpkg
if [ -d /var/cache/postgresql ]; then
  cp -a /var/cache/postgresql "$work/pgcache"
  mount --bind "$work/pgcache" /var/cache/postgresql
fi

if ls "$lib/lib" "$share/extension" | grep -q idempotency; then
  fail "Debian's postgresql-$major files already hold idempotency"
fi
log "dpkg -i $(basename "$deb")"
dpkg --log="$work/dpkg.log" -i "$deb" >&2
[ "$(dpkg-query -W -f='${Status} ${Version}' "postgresql-$major-idempotency")" = "install ok installed $version" ] ||
  fail "dpkg does not list postgresql-$major-idempotency $version as installed"
for f in "$lib/lib/idempotency.so" "$share/extension/idempotency.control" \
  "$share/extension/idempotency--$version.sql"; do
  [ -f "$f" ] || fail "$f is missing after dpkg -i"
done

data=$work/data
install -d -o postgres -m 0700 "$data"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
as_pg() { runuser -u postgres -- "$@"; }
as_pg "$lib/bin/initdb" -A trust -U postgres -E UTF8 --locale=C --no-sync -D "$data" >/dev/null
cat >>"$data/postgresql.auto.conf" <<CONF
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$data'
shared_preload_libraries = 'idempotency'
# as in scripts/demo.sh: step 4 shows a stale lease taken over by a claim
idempotency.reclaim_grace = '1min'
CONF
as_pg env -u RUST_BACKTRACE "$lib/bin/pg_ctl" -w -D "$data" -l "$data/server.log" start >/dev/null
trap 'as_pg "$lib/bin/pg_ctl" -D "$data" -m immediate stop >/dev/null 2>&1 || true' EXIT
psql=("$lib/bin/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres)
q() { "${psql[@]}" -At -d "$1" -c "$2"; }
expect() { # DB SQL EXPECTED
  local got
  got=$(q "$1" "$2") || fail "$2"
  [ "$got" = "$3" ] || fail "$2: got '$got', expected '$3'"
}

log "CREATE EXTENSION and the demo (scripts/demo.sql)"
q postgres "CREATE DATABASE demo" >/dev/null
demo=$("${psql[@]}" -d demo -f "$repo/scripts/demo.sql" 2>&1) || { echo "$demo" >&2; fail "demo.sql"; }
for want in "new_claim" "replay_success" "SQLSTATE: P4002" "processing_stale" "SQLSTATE: P4012"; do
  grep -qF "$want" <<<"$demo" || { echo "$demo" >&2; fail "the demo's output lacks '$want'"; }
done

log "smoke test"
q postgres "CREATE DATABASE smoke" >/dev/null
q smoke "CREATE EXTENSION idempotency" >/dev/null
expect smoke "SELECT extversion FROM pg_extension WHERE extname = 'idempotency'" "$version"
expect smoke "SELECT idem_version()" "$version"
expect smoke "SELECT setting FROM pg_config WHERE name = 'PKGLIBDIR'" "$lib/lib"
expect smoke "SELECT outcome FROM idem_claim('smoke', 'k1', idem_hash('{\"a\": 1}'::jsonb))" "new_claim"
expect smoke "SELECT idem_complete('smoke', 'k1', '{\"done\": true}')" ""
expect smoke "SELECT outcome || ' ' || response::text FROM idem_claim('smoke', 'k1', idem_hash('{ \"a\": 1.0 }'::jsonb))" \
  'replay_success {"done": true}'
expect smoke "SELECT idem_inbox_accept('c', 'm', 'h')::text || ' ' || idem_inbox_accept('c', 'm', 'h')::text" "true false"
expect smoke "SELECT idem_outbox_put('t', '{}', 'd1') = idem_outbox_put('t', '{}', 'd1')" "t"
expect smoke "SELECT count(*) FROM idempotency.outbox" "1"
expect smoke "SELECT (value > 0)::text FROM idem_metrics() WHERE name = 'writes_direct'" "true"
expect smoke "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'idempotency launcher'" "1"
[ -n "$(ls "$share/extension"/idempotency--*--"$version".sql 2>/dev/null)" ] &&
  expect smoke "SELECT count(*) > 0 FROM pg_extension_update_paths('idempotency') WHERE target = '$version' AND path IS NOT NULL" "t"

as_pg "$lib/bin/pg_ctl" -D "$data" -m fast stop >/dev/null
trap - EXIT
log "dpkg -r"
dpkg --log="$work/dpkg.log" -r "postgresql-$major-idempotency" >&2
if ls "$lib/lib" "$share/extension" | grep -q idempotency; then
  fail "dpkg -r left idempotency files behind"
fi

# The tarball on the same pristine Postgres: its install.sh, then CREATE EXTENSION.
tarball=$(dirname "$deb")/idempotency-$version-pg$major-linux-$arch.tar.gz
log "tarball: $(basename "$tarball"), install.sh"
tar -xzf "$tarball" -C "$work"
"$work/idempotency-$version-pg$major-linux-$arch/install.sh" "$lib/bin/pg_config" >&2
as_pg env -u RUST_BACKTRACE "$lib/bin/pg_ctl" -w -D "$data" -l "$data/server.log" start >/dev/null
trap 'as_pg "$lib/bin/pg_ctl" -D "$data" -m immediate stop >/dev/null 2>&1 || true' EXIT
q postgres "CREATE DATABASE from_tarball" >/dev/null
q from_tarball "CREATE EXTENSION idempotency" >/dev/null
expect from_tarball "SELECT extversion || ' ' || idem_version() FROM pg_extension WHERE extname = 'idempotency'" "$version $version"
expect from_tarball "SELECT outcome FROM idem_claim('t', 'k', 'h')" "new_claim"
as_pg "$lib/bin/pg_ctl" -D "$data" -m fast stop >/dev/null
trap - EXIT
