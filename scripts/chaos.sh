#!/usr/bin/env bash
# The chaos audit, long form (issue #16; docs/chaos.md): installs the extension (release build)
# into Postgres MAJOR, then runs tests/clusters/chaos.rs against it with the given figures.
# Usage: scripts/chaos.sh [--sessions N] [--seconds S] [--seed X] [--major NN] [--pg-config PATH]
#   defaults: 16 sessions, 600 s, seed 1, major 16, pg_config from ~/.pgrx/config.toml
#   (pgrx-config/setup.sh NN sets that Postgres up if it is missing).
set -euo pipefail
cd "$(dirname "$0")/.."
sessions=16 seconds=600 seed=1 major=16 pg_config=
while [ $# -gt 0 ]; do
  case "$1" in
  --sessions) sessions=$2; shift 2 ;;
  --seconds) seconds=$2; shift 2 ;;
  --seed) seed=$2; shift 2 ;;
  --major) major=${2#pg}; shift 2 ;;
  --pg-config) pg_config=$2; shift 2 ;;
  -h | --help) sed -n '2,6p' "$0"; exit 0 ;;
  *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
config=${PGRX_HOME:-$HOME/.pgrx}/config.toml
if [ -z "$pg_config" ]; then
  [ -f "$config" ] && grep -q "^pg$major = " "$config" || pgrx-config/setup.sh "$major"
  pg_config=$(sed -n "s/^pg$major = \"\(.*\)\"\$/\1/p" "$config")
fi
features="pg$major pg_test"
echo "== installing the extension (release) into $pg_config"
env -u RUST_BACKTRACE cargo pgrx install --release --no-default-features --features "$features" -c "$pg_config"
echo "== chaos: $sessions sessions, $seconds s, seed $seed, Postgres $major"
exec env -u RUST_BACKTRACE IDEM_PG_MAJOR="$major" IDEM_FAULTS_MAJOR="$major" IDEM_PG_CONFIG="$pg_config" \
  IDEM_CHAOS_SESSIONS="$sessions" IDEM_CHAOS_SECONDS="$seconds" IDEM_CHAOS_SEED="$seed" \
  cargo test --no-default-features --features "$features" --test clusters chaos:: -- --nocapture
