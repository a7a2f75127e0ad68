#!/usr/bin/env bash
# Campaign 5 (docs/mutants-campaigns.md): the portable edition's mutations (scripts/mutants/portable.txt),
# each applied alone and run against the tests it names, on Postgres 16. The portable edition
# is read at run time (the tests run scripts/portable.sh), so the test binary is built once and
# no mutation needs a build. A mutation is caught when a named test fails.
#
# Usage: scripts/mutants/portable.sh [NAME ...]   (default: every mutation of the list)
# Environment: CARGO_TARGET_DIR, IDEM_MUT_PG_CONFIG (a pg16 pg_config the extension is
#   installed into, for the tests that compare with it; default the shared one).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
list=$here/portable.txt
apply=(python3 "$here/apply.py" "$list")
"${apply[@]}" check >/dev/null || { echo "portable: a mutation does not apply" >&2; exit 2; }
paths=(portable sql scripts/portable.sh)
git diff --quiet -- "${paths[@]}" || { echo "portable: portable/, sql/ or scripts/portable.sh has local edits" >&2; exit 2; }
pg_config=${IDEM_MUT_PG_CONFIG:-/opt/idempotency-pg/16/bin/pg_config}
features=(--no-default-features --features "pg16 pg_test")
restore() { git checkout -q -- "${paths[@]}"; }
trap restore EXIT
cargo pgrx install --test "${features[@]}" -c "$pg_config" >/dev/null 2>&1 || { echo "portable: install failed" >&2; exit 2; }
bin=$(cargo test "${features[@]}" --test integration --no-run 2>&1 |
      sed -n 's/.*Executable tests\/integration\/main.rs (\(.*\))/\1/p')
[ -x "$bin" ] || { echo "portable: no integration test binary" >&2; exit 2; }
envs=(env -u RUST_BACKTRACE IDEM_PG_MAJOR=16 IDEM_PG_CONFIG="$pg_config" RUST_TEST_THREADS=4)
mapfile -t rows < <("${apply[@]}" list)
[ $# -gt 0 ] || set -- $(printf '%s\n' "${rows[@]}" | cut -f1)
caught=0 total=0
for name in "$@"; do
  tests=$(printf '%s\n' "${rows[@]}" | awk -F'\t' -v n="$name" '$1 == n {print $2}')
  filters=()
  for t in $tests; do filters+=("${t#it:integration:}"); done
  "${apply[@]}" apply "$name" >/dev/null || exit 2
  started=$(date +%s)
  if "${envs[@]}" "$bin" "${filters[@]}" >/dev/null 2>&1; then verdict=SURVIVED; else verdict=caught; caught=$((caught + 1)); fi
  total=$((total + 1))
  printf '%-34s %-9s %4s s  (%s)\n' "$name" "$verdict" "$(( $(date +%s) - started ))" "${filters[*]}"
  restore
done
echo "portable campaign: $caught of $total caught"
