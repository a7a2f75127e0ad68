#!/usr/bin/env bash
# Campaign 4 (docs/mutants-campaigns.md): the mutations of the generations layout's decisions
# (M21-M43 in campaign3_apply.py), each applied alone against the tests of that layout on Postgres 16:
# tests/integration/upkeep/generations/, the differential test in that layout, the direct
# path's (tests/integration/claim/generations_path.rs), and the
# worker's rotation (tests/clusters/worker/generations.rs). Not the whole suite: a survivor
# here is run against the whole suite with scripts/mutants/whole-suite.sh.
#
# Usage: scripts/mutants/layout.sh [M ...]   (default M21-M43)
# Environment: CARGO_TARGET_DIR, IDEM_MUT_PG_CONFIG (a pg16 pg_config the extension is
#   installed into; default the shared one).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
apply=(python3 "$here/campaign3_apply.py")
wanted=("$@")
[ ${#wanted[@]} -gt 0 ] || wanted=(M21 M22 M23 M24 M25 M26 M27 M28 M29 M30 M31 M32 M33 M34 M35 M36 M37 M38 M39 M40 M41 M42 M43)
"${apply[@]}" --check "${wanted[@]}" >/dev/null || { echo "layout: a mutation does not apply" >&2; exit 2; }
git diff --quiet -- src sql crates portable || { echo "layout: src/, sql/, crates/ or portable/ has local edits" >&2; exit 2; }
pg_config=${IDEM_MUT_PG_CONFIG:-/opt/idempotency-pg/16/bin/pg_config}
features=(--no-default-features --features "pg16 pg_test")
restore() { git checkout -q -- src sql crates portable; }
trap restore EXIT
run_tests() {
  local bins
  cargo pgrx install --test "${features[@]}" -c "$pg_config" >/dev/null 2>&1 || return 2
  bins=$(cargo test "${features[@]}" --test integration --test clusters --no-run 2>&1 |
         sed -n 's/.*Executable tests\/\([a-z]*\)\/main.rs (\(.*\))/\1 \2/p')
  local envs=(env -u RUST_BACKTRACE IDEM_PG_MAJOR=16 IDEM_PG_CONFIG="$pg_config" RUST_TEST_THREADS=4)
  while read -r name bin; do
    case $name in
      integration) "${envs[@]}" "$bin" upkeep::generations agree_in_the_generations_layout claim::generations_path >/dev/null 2>&1 || return 1 ;;
      clusters) "${envs[@]}" "$bin" worker::generations >/dev/null 2>&1 || return 1 ;;
    esac
  done <<< "$bins"
  return 0
}
for m in "${wanted[@]}"; do
  "${apply[@]}" "$m" >/dev/null
  started=$(date +%s)
  run_tests
  case $? in
    0) verdict=survived ;;
    1) verdict=caught ;;
    *) verdict="did not build" ;;
  esac
  echo "$m $verdict ($(( $(date +%s) - started )) s)"
  restore
done
