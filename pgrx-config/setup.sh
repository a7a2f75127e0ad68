#!/usr/bin/env bash
# Installs what building and testing the extension needs on Debian 12 (root), then points
# cargo-pgrx at the installed pg_config(s). Idempotent: a second run only checks.
# Usage: pgrx-config/setup.sh [MAJOR ...]   (default: every version in pgrx-config/versions)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
PGRX_VERSION=0.18.1

log() { printf '[setup] %s\n' "$*" >&2; }

versions=("$@")
if [ ${#versions[@]} -eq 0 ]; then
  mapfile -t versions < <(grep -Ev '^\s*(#|$)' "$here/versions")
fi

need_apt=()
for pkg in build-essential libclang-dev clang sudo pkg-config postgresql-15 postgresql-server-dev-15; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  log "apt-get install ${need_apt[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if ! cargo pgrx --version 2>/dev/null | grep -q " $PGRX_VERSION\$"; then
  log "cargo install cargo-pgrx $PGRX_VERSION (a few minutes, once)"
  cargo install cargo-pgrx --version "=$PGRX_VERSION" --locked
fi

init_args=()
for v in "${versions[@]}"; do
  case "$v" in
    15) pg_config=/usr/lib/postgresql/15/bin/pg_config ;;
    *) log "Postgres $v is not supported by this script yet"; exit 2 ;;
  esac
  init_args+=("--pg$v=$pg_config")
done
log "cargo pgrx init ${init_args[*]}"
cargo pgrx init "${init_args[@]}" >/dev/null
log "ready: ${versions[*]}"
