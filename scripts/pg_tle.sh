#!/usr/bin/env bash
# pg_tle 1.5.2 (../shared/pg_tle, checked against its sha256) built for a Postgres, in a copy of
# that Postgres installation without the native idempotency files: pg_tle refuses to register
# an extension whose control file exists on disk, and a managed host has none.
#
#   scripts/pg_tle.sh PG_CONFIG DEST     -> DEST is a copy of PG_CONFIG's installation with
#                                           pg_tle installed; prints DEST/bin/pg_config
# Needs the gssapi headers when that Postgres was built with them (Debian: libkrb5-dev).
# Re-running with an existing DEST of the same Postgres version, pg_tle installed, does nothing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pg_config=${1:?usage: scripts/pg_tle.sh PG_CONFIG DEST}
dest=${2:?usage: scripts/pg_tle.sh PG_CONFIG DEST}
tarball=${PG_TLE_TARBALL:-$root/../shared/pg_tle/pg_tle-1.5.2.tar.gz}
sha=8fb28f2a79d452ebd244a072f5eee7570894abca3112fbb27df033f78003480f

if [ -f "$dest/share/extension/pg_tle.control" ] && [ -x "$dest/bin/pg_config" ] &&
   [ "$("$dest/bin/pg_config" --version)" = "$("$pg_config" --version)" ]; then
    echo "$dest/bin/pg_config"
    exit 0
fi
echo "$sha  $tarball" | sha256sum -c --quiet - >&2
prefix=$(cd "$("$pg_config" --bindir)/.." && pwd)
# The copy must be a self-contained prefix (bin, lib, share, include under one directory).
for d in share lib include; do
    [ -d "$prefix/$d" ] || { echo "pg_tle.sh: $prefix is not a single-prefix installation" >&2; exit 1; }
done
rm -rf "$dest.tmp"
mkdir -p "$(dirname "$dest")"
cp -a "$prefix" "$dest.tmp"
rm -f "$dest.tmp"/share/extension/idempotency* "$dest.tmp"/lib/idempotency.so
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -xzf "$tarball" -C "$work"
make -s -C "$work/pg_tle-1.5.2" PG_CONFIG="$dest.tmp/bin/pg_config" -j2 >&2
make -s -C "$work/pg_tle-1.5.2" PG_CONFIG="$dest.tmp/bin/pg_config" install >&2
rm -rf "$dest"
mv "$dest.tmp" "$dest"
echo "$dest/bin/pg_config"
