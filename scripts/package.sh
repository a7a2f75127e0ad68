#!/usr/bin/env bash
# Release packages, per Postgres major, into target/packages/:
#   idempotency-VERSION-pgMAJOR-linux-ARCH.tar.gz  lib/idempotency.so, extension/ (control,
#                                                    install and upgrade scripts), install.sh
#   postgresql-MAJOR-idempotency_VERSION_ARCH.deb   the same files in Debian's layout
#                                                    (/usr/lib/postgresql/MAJOR/lib,
#                                                    /usr/share/postgresql/MAJOR/extension),
#                                                    Depends: postgresql-MAJOR
# Both come from `cargo pgrx package` (release profile, no pg_test), built against the
# pg_config of each major in ~/.pgrx/config.toml (pgrx-config/setup.sh MAJOR sets it up).
# A package works with any Postgres of the same major (the server's ABI is fixed per major).
#
# Usage: scripts/package.sh [MAJOR ...]   (default: every version in pgrx-config/versions)
#   IDEM_PACKAGE_PROFILE=dev  builds unoptimized (quick, for testing the packaging itself)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$repo/target}
out=$CARGO_TARGET_DIR/packages
config=${PGRX_HOME:-$HOME/.pgrx}/config.toml
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
arch=$(dpkg --print-architecture 2>/dev/null || uname -m)
profile=${IDEM_PACKAGE_PROFILE:-release}

majors=("${@#pg}")
if [ ${#majors[@]} -eq 0 ]; then
  mapfile -t majors < <(grep -Eo '^[0-9]+' pgrx-config/versions | sort -n)
fi
mkdir -p "$out"
log() { printf '[package] %s\n' "$*" >&2; }

for major in "${majors[@]}"; do
  pgc=$(sed -n "s/^pg$major = \"\(.*\)\"\$/\1/p" "$config" 2>/dev/null)
  [ -x "$pgc" ] || { log "pg$major is not set up: run pgrx-config/setup.sh $major"; exit 1; }
  stage=$(mktemp -d "$out/.stage-pg$major-XXXXXX")
  trap 'rm -rf "$stage"' EXIT
  log "pg$major: cargo pgrx package ($profile) against $pgc"
  env -u RUST_BACKTRACE cargo pgrx package --pg-config "$pgc" --profile "$profile" \
    --no-default-features --features "pg$major" --out-dir "$stage/pgrx" >&2

  # pgrx mirrors the build machine's pg_config paths; take the files from wherever they are.
  so=$(find "$stage/pgrx" -name idempotency.so -type f)
  extdir=$(dirname "$(find "$stage/pgrx" -name idempotency.control -type f)")
  [ -f "$so" ] && [ -f "$extdir/idempotency--$version.sql" ] || {
    log "pg$major: no idempotency.so or idempotency--$version.sql in the pgrx package"
    exit 1
  }

  # The tarball: a flat layout and an installer that asks pg_config where things go.
  name=idempotency-$version-pg$major-linux-$arch
  mkdir -p "$stage/$name/lib" "$stage/$name/extension"
  install -m 0755 "$so" "$stage/$name/lib/"
  install -m 0644 "$extdir"/idempotency* "$stage/$name/extension/"
  cat >"$stage/$name/install.sh" <<EOF
#!/bin/sh
# Installs idempotency $version for PostgreSQL $major. Usage: ./install.sh [PG_CONFIG]
set -eu
cd "\$(dirname "\$0")"
pg_config=\${1:-pg_config}
major=\$("\$pg_config" --version | sed 's/^PostgreSQL \\([0-9]*\\).*/\\1/')
[ "\$major" = $major ] || { echo "this package is for PostgreSQL $major, \$pg_config is \$major" >&2; exit 1; }
install -m 0755 lib/idempotency.so "\$("\$pg_config" --pkglibdir)/"
install -m 0644 extension/* "\$("\$pg_config" --sharedir)/extension/"
echo "installed; add idempotency to shared_preload_libraries, restart, then CREATE EXTENSION idempotency"
EOF
  chmod 0755 "$stage/$name/install.sh"
  tar -C "$stage" --owner=0 --group=0 -czf "$out/$name.tar.gz" "$name"

  # The Debian package.
  pkg=postgresql-$major-idempotency
  root=$stage/deb
  install -d "$root/DEBIAN" "$root/usr/lib/postgresql/$major/lib" \
    "$root/usr/share/postgresql/$major/extension" "$root/usr/share/doc/$pkg"
  install -m 0644 "$so" "$root/usr/lib/postgresql/$major/lib/"
  install -m 0644 "$extdir"/idempotency* "$root/usr/share/postgresql/$major/extension/"
  printf 'idempotency %s for PostgreSQL %s, built from %s.\nLicense: Apache-2.0\n' \
    "$version" "$major" "$(git rev-parse --short HEAD 2>/dev/null || echo source)" \
    >"$root/usr/share/doc/$pkg/copyright"
  cat >"$root/DEBIAN/control" <<EOF
Package: $pkg
Version: $version
Architecture: $arch
Maintainer: idempotency maintainers <idempotency@localhost>
Depends: postgresql-$major
Section: database
Priority: optional
Installed-Size: $(du -sk "$root/usr" | cut -f1)
Description: idempotency keys, inbox and outbox for PostgreSQL $major
 Exactly-once-ish effects on PostgreSQL: idempotency keys with replay,
 canonical request hashing (RFC 8785), a consumer inbox and a transactional
 outbox. Add idempotency to shared_preload_libraries, restart, then run
 CREATE EXTENSION idempotency.
EOF
  dpkg-deb --root-owner-group --build "$root" "$out/${pkg}_${version}_$arch.deb" >&2
  rm -rf "$stage"
  trap - EXIT
  log "pg$major: $out/$name.tar.gz, $out/${pkg}_${version}_$arch.deb"
done
