#!/usr/bin/env bash
# A local Citus cluster with the extension: one coordinator and two workers on localhost.
#
#   scripts/citus.sh up [MAJOR]     build + install Citus 14.0.1 and the extension for Postgres
#                                   MAJOR (16, 17 or 18; default 17), start the three servers
#                                   (shared_preload_libraries = 'citus,idempotency'), register the
#                                   workers and CREATE EXTENSION idempotency (Citus propagates it)
#   scripts/citus.sh down [MAJOR]   stop the servers and remove their data directories
#   scripts/citus.sh status [MAJOR] the cluster's nodes, or "down"
#   scripts/citus.sh env [MAJOR]    print PG* variables to reach the coordinator (eval "$(...)")
#
# Where things go (per MAJOR):
#   data directories  /var/tmp/idem-citus-MAJOR/{coordinator,worker1,worker2} (owned by postgres)
#   sockets + logs    /var/tmp/idem-citus-MAJOR/
#   ports             coordinator CITUS_PORT (default 9700 + 10 * (MAJOR - 16)), workers +1, +2
#
# Citus source: ../shared/citus/citus-14.0.1.tar.gz relative to the repository root if it is
# there, else the release tag's archive from GitHub (cached in /var/cache/idempotency-citus).
# Either way the unpacked tree must have the pinned content hash (CITUS_TREE_SHA256: sha256 of
# the sorted `sha256sum` lines of every file), because GitHub's generated archive is not
# byte-identical to the shared one; the shared tarball is also checked by its own sha256.
#
# Environment:
#   IDEM_PG_CONFIG          the pg_config to use (default: pgNN in ~/.pgrx/config.toml, else
#                           /opt/idempotency-pg/MAJOR/bin/pg_config)
#   CITUS_SKIP_EXTENSION=1  do not run `cargo pgrx install` (the caller installed it already,
#                           e.g. `cargo pgrx test`)
#   CITUS_PROFILE=dev       install a debug build of the extension (faster to build; default:
#                           release)
#   CITUS_PORT              the coordinator's port
#   CITUS_BASE              instead of /var/tmp/idem-citus-MAJOR (two clusters of one major)
#   CARGO_TARGET_DIR        as usual for the extension's build
set -euo pipefail

CITUS_VERSION=14.0.1
CITUS_TARBALL_SHA256=acfa9a77cd84a8e1edab26cca4a71355f39c910c01586da89560e0240d4b05ba
CITUS_TREE_SHA256=6128e63433b00e84327b078016be2a05c68f977abc5318fb092647dcac090b36
CITUS_URL="https://github.com/citusdata/citus/archive/refs/tags/v${CITUS_VERSION}.tar.gz"
CITUS_DEBS=(libcurl4-openssl-dev liblz4-dev libzstd-dev libkrb5-dev libselinux1-dev libxslt1-dev libpam0g-dev)

repo=$(cd "$(dirname "$0")/.." && pwd)
cmd=${1:-}
major=${2:-17}
started=$SECONDS
log() { printf '[citus %3ss] %s\n' "$((SECONDS - started))" "$*" >&2; }
die() { log "error: $*"; exit 1; }

case "$major" in
  16|17|18) ;;
  *) die "Citus $CITUS_VERSION supports Postgres 16, 17 and 18, not '$major'" ;;
esac

base=${CITUS_BASE:-/var/tmp/idem-citus-$major}
port0=${CITUS_PORT:-$((9700 + 10 * (major - 16)))}
nodes=(coordinator worker1 worker2)
port_of() { case "$1" in coordinator) echo "$port0" ;; worker1) echo $((port0 + 1)) ;; worker2) echo $((port0 + 2)) ;; esac; }

pg_config_path() {
  if [[ -n "${IDEM_PG_CONFIG:-}" ]]; then echo "$IDEM_PG_CONFIG"; return; fi
  local cfg="${PGRX_HOME:-$HOME/.pgrx}/config.toml" line
  if [[ -f "$cfg" ]]; then
    line=$(grep -E "^pg$major *=" "$cfg" | head -n1 || true)
    if [[ -n "$line" ]]; then echo "$line" | sed -E 's/^[^=]*= *"?([^"]*)"?.*/\1/'; return; fi
  fi
  echo "/opt/idempotency-pg/$major/bin/pg_config"
}

# Run a command as the server's OS user (initdb refuses root).
as_pg() {
  if [[ $(id -u) == 0 ]]; then runuser -u postgres -- env -u RUST_BACKTRACE "$@"
  else env -u RUST_BACKTRACE "$@"; fi
}

tree_hash() { (cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1); }

install_debs() {
  local missing=() p
  for p in "${CITUS_DEBS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  ((${#missing[@]} == 0)) && return
  [[ $(id -u) == 0 ]] || die "missing Debian packages (install as root): ${missing[*]}"
  log "apt-get install ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null ||
    { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null; }
}

# The Citus source tarball: the shared copy, else the release tag from GitHub.
citus_tarball() {
  # Relative to the repository root; in a git worktree, also relative to the main checkout.
  local shared="$repo/../shared/citus/citus-$CITUS_VERSION.tar.gz" common
  if [[ ! -f "$shared" ]] && common=$(git -C "$repo" rev-parse --path-format=absolute --git-common-dir 2>/dev/null); then
    [[ -f "$(dirname "$common")/../shared/citus/citus-$CITUS_VERSION.tar.gz" ]] &&
      shared="$(cd "$(dirname "$common")/.." && pwd)/shared/citus/citus-$CITUS_VERSION.tar.gz"
  fi
  if [[ -f "$shared" ]]; then
    echo "$CITUS_TARBALL_SHA256  $shared" | sha256sum -c --quiet - >&2 ||
      die "$shared does not have the pinned sha256 $CITUS_TARBALL_SHA256"
    echo "$shared"; return
  fi
  local cache=/var/cache/idempotency-citus
  mkdir -p "$cache"
  local file="$cache/citus-$CITUS_VERSION-github.tar.gz"
  if [[ ! -f "$file" ]]; then
    log "downloading $CITUS_URL (no $shared)"
    curl -fsSL --retry 3 -o "$file.part" "$CITUS_URL" || die "download of $CITUS_URL failed"
    mv "$file.part" "$file"
  fi
  echo "$file"
}

build_citus() {
  local pg_config=$1 libdir sharedir
  libdir=$("$pg_config" --pkglibdir)
  sharedir=$("$pg_config" --sharedir)
  if [[ -f "$libdir/citus.so" && -f "$sharedir/extension/citus.control" ]] &&
     grep -qx "$CITUS_VERSION" "$sharedir/extension/.idem-citus-version" 2>/dev/null; then
    log "Citus $CITUS_VERSION already installed in $libdir"
    return
  fi
  install_debs
  local tarball src
  tarball=$(citus_tarball)
  src=$(mktemp -d "/var/tmp/idem-citus-build-$major.XXXXXX")
  tar -xzf "$tarball" -C "$src"
  local dir
  dir=$(find "$src" -mindepth 1 -maxdepth 1 -type d | head -n1)
  local got
  got=$(tree_hash "$dir")
  [[ "$got" == "$CITUS_TREE_SHA256" ]] ||
    die "the unpacked Citus tree of $tarball has content hash $got, not the pinned $CITUS_TREE_SHA256"
  log "building Citus $CITUS_VERSION against $("$pg_config" --version) in $dir (about 30 s on 2 cores)"
  (cd "$dir" && ./configure -q PG_CONFIG="$pg_config" >"$src/configure.log" 2>&1 &&
     nice make -s -j2 >"$src/make.log" 2>&1 && make -s install >"$src/install.log" 2>&1) ||
    die "Citus build failed; see $src/*.log"
  echo "$CITUS_VERSION" >"$sharedir/extension/.idem-citus-version"
  rm -rf "$src"
}

install_extension() {
  local pg_config=$1
  if [[ "${CITUS_SKIP_EXTENSION:-0}" == 1 ]]; then return; fi
  log "cargo pgrx install (pg$major) into $("$pg_config" --pkglibdir)"
  local profile=(--release)
  [[ "${CITUS_PROFILE:-release}" == dev ]] && profile=()
  (cd "$repo" && cargo pgrx install "${profile[@]}" --no-default-features --features "pg$major" -c "$pg_config" >&2)
}

psql_at() { # node, sql...
  local node=$1; shift
  as_pg "$bindir/psql" -X -q -v ON_ERROR_STOP=1 -h "$base" -p "$(port_of "$node")" -d postgres "$@"
}

down() {
  local pg_config bindir node
  pg_config=$(pg_config_path)
  bindir=$("$pg_config" --bindir)
  for node in "${nodes[@]}"; do
    if [[ -f "$base/$node/postmaster.pid" ]]; then
      as_pg "$bindir/pg_ctl" -D "$base/$node" -m immediate -w stop >/dev/null 2>&1 || true
    fi
  done
  rm -rf "$base"
  log "down: removed $base"
}

up() {
  local pg_config
  pg_config=$(pg_config_path)
  [[ -x "$pg_config" ]] || die "no pg_config for Postgres $major at $pg_config (run pgrx-config/setup.sh $major)"
  bindir=$("$pg_config" --bindir)
  build_citus "$pg_config"
  install_extension "$pg_config"
  down 2>/dev/null
  mkdir -p "$base"
  chown postgres: "$base" 2>/dev/null || true
  local node
  for node in "${nodes[@]}"; do
    as_pg "$bindir/initdb" -D "$base/$node" -A trust -U postgres --no-sync >/dev/null
    cat >>"$base/$node/postgresql.conf" <<EOF
# scripts/citus.sh
port = $(port_of "$node")
listen_addresses = 'localhost'
unix_socket_directories = '$base'
shared_preload_libraries = 'citus,idempotency'
max_prepared_transactions = 100
wal_level = logical
max_connections = 200
fsync = off
synchronous_commit = off
full_page_writes = off
shared_buffers = 64MB
log_min_messages = warning
citus.log_distributed_deadlock_detection = off
EOF
    as_pg "$bindir/pg_ctl" -D "$base/$node" -l "$base/$node.log" -w -t 60 start >/dev/null ||
      die "$node did not start (port $(port_of "$node")); its log: $(tail -n 20 "$base/$node.log" 2>/dev/null)"
  done
  for node in "${nodes[@]}"; do
    psql_at "$node" -c "CREATE EXTENSION citus"
  done
  psql_at coordinator \
    -c "SELECT pg_catalog.citus_set_coordinator_host('localhost', $(port_of coordinator))" \
    -c "SELECT pg_catalog.citus_add_node('localhost', $(port_of worker1))" \
    -c "SELECT pg_catalog.citus_add_node('localhost', $(port_of worker2))" \
    -c "CREATE EXTENSION idempotency" >/dev/null
  log "up: Citus $CITUS_VERSION on $("$pg_config" --version): coordinator localhost:$port0, workers :$((port0 + 1)) :$((port0 + 2)); sockets in $base"
  env_vars
}

env_vars() {
  echo "export PGHOST=$base PGPORT=$port0 PGUSER=postgres PGDATABASE=postgres"
}

status() {
  local pg_config
  pg_config=$(pg_config_path)
  bindir=$("$pg_config" --bindir)
  if [[ ! -f "$base/coordinator/postmaster.pid" ]]; then echo down; return; fi
  psql_at coordinator -c "SELECT nodeid, nodename, nodeport, groupid, noderole FROM pg_catalog.pg_dist_node ORDER BY nodeid"
}

case "$cmd" in
  up) up ;;
  down) down ;;
  status) status ;;
  env) env_vars ;;
  *) echo "usage: $0 up|down|status|env [MAJOR]" >&2; exit 2 ;;
esac
