#!/usr/bin/env bash
# An outside-style mutation campaign (docs/mutants.md, "Campaign 3"): each mutation of
# scripts/mutants/campaign3_apply.py is applied alone, the extension is installed, and the
# WHOLE Postgres 16 suite runs against it (every #[pg_test] and every tests/ binary), not
# the tests named for it. Like the outside campaign of round 6, it leaves out chaos, failover,
# Citus, pg_tle and the HTTP row. A mutation is caught when any test fails; the run stops at
# the first failing binary, as `cargo test` does. The Postgres-free crate's tests run first.
#
# Usage: scripts/mutants/whole-suite.sh [M ...]    (default: every mutation)
# Environment: CARGO_TARGET_DIR, PGRX_HOME, IDEM_MUT_PG_CONFIG (a private pg16 copy: the
#   extension is installed into it), IDEM_MUT_PGDATA, IDEM_RUNAS (default postgres).
# Output: one line per mutation, and the table in $CARGO_TARGET_DIR/mutants3/results.md.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cd "$repo"
apply=(python3 "$here/campaign3_apply.py")
mapfile -t all < <(sed -n 's/^ "\(M[0-9]*\)": .*/\1/p' "$here/campaign3_apply.py")
wanted=("$@")
[ ${#wanted[@]} -gt 0 ] || wanted=("${all[@]}")
"${apply[@]}" --check "${wanted[@]}" >/dev/null || { echo "whole-suite: a mutation does not apply" >&2; exit 2; }
git diff --quiet -- src sql crates || { echo "whole-suite: src/, sql/ or crates/ has local edits" >&2; exit 2; }

FEATURES="pg16 pg_test"
PG_CONFIG=${IDEM_MUT_PG_CONFIG:?set IDEM_MUT_PG_CONFIG to a private pg16 pg_config}
PGDATA_DIR=${IDEM_MUT_PGDATA:-/var/tmp/idem-mut-pgdata}
RUNAS=${IDEM_RUNAS:-postgres}
out=${CARGO_TARGET_DIR:?}/mutants3
mkdir -p "$out/logs"
install -d -o "$RUNAS" -m 0700 "$PGDATA_DIR"
noop=$out/no-install
printf '#!/bin/sh\nexit 0\n' >"$noop" && chmod +x "$noop"
# As `cargo pgrx test` sets them for the harness (see scripts/mutants.sh).
test_env=(env -u RUST_BACKTRACE CARGO_PGRX="$noop" PGRX_FEATURES="$FEATURES"
  PGRX_NO_DEFAULT_FEATURES=true PGRX_ALL_FEATURES=false PGRX_BUILD_PROFILE=dev PGRX_NO_SCHEMA=false
  CARGO_PGRX_TEST_PGDATA="$PGDATA_DIR" CARGO_MANIFEST_DIR="$repo" USER="${USER:-$(id -un)}"
  CARGO_PGRX_TEST_RUNAS="$RUNAS" IDEM_PG_MAJOR=16 IDEM_PG_CONFIG="$PG_CONFIG" IDEM_CITUS=0 IDEM_PGTLE=0)

restore() { git checkout -q -- src sql crates && git ls-files src sql crates | xargs touch; }
trap restore EXIT

install_ext() { # LOG
  env -u RUST_BACKTRACE cargo pgrx install --test --pg-config "$PG_CONFIG" --no-default-features \
    --features "$FEATURES" >>"$1" 2>&1
}

echo "whole-suite: building the test binaries"
json=$(cargo test --no-run --no-default-features --features "$FEATURES" --lib --tests \
  --message-format=json 2>"$out/logs/_build.log") || { echo "whole-suite: tests do not build" >&2; exit 2; }
mapfile -t bins < <(printf '%s\n' "$json" | python3 -c '
import json, sys
rows = []
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m.get("profile", {}).get("test"):
        t = m["target"]
        lib = "lib" in t["kind"] or "cdylib" in t["kind"]
        if t["name"] in ("chaos", "failover", "citus"): continue
        rows.append((0 if lib else 1, t["name"], m["executable"]))
for _, name, exe in sorted(rows): print(name + "\t" + exe)')
echo "whole-suite: ${#bins[@]} test binaries"

rows=() caught=0
for m in "${wanted[@]}"; do
  log=$out/logs/$m.log t0=$SECONDS verdict=survived by=
  : >"$log"
  "${apply[@]}" "$m" >>"$log" 2>&1
  if ! install_ext "$log"; then
    verdict="build failed"
  elif ! (echo "+ pure crates" >>"$log"; cargo test -p idem-canonical >>"$log" 2>&1); then
    verdict=caught by="idem-canonical (cargo test)"
  else
    for row in "${bins[@]}"; do
      name=${row%%$'\t'*} exe=${row#*$'\t'}
      echo "+ $name" >>"$log"
      "${test_env[@]}" "$exe" --test-threads 2 >"$log.part" 2>&1
      rc=$?
      cat "$log.part" >>"$log"
      if [ $rc -ne 0 ]; then
        verdict=caught
        by="$name: $(grep -aoE '^test [^ ]+ \.\.\. FAILED' "$log.part" | awk '{print $2}' | tr '\n' ' ')"
        break
      fi
    done
  fi
  restore
  [ "$verdict" = caught ] && caught=$((caught + 1))
  rows+=("| $m | $verdict | ${by:-} | $((SECONDS - t0)) s |")
  echo "whole-suite: $m $verdict ${by:-} ($((SECONDS - t0)) s)"
done
install_ext "$out/logs/_restore.log" || echo "whole-suite: reinstalling the unmutated extension failed" >&2
{
  echo "| mutation | verdict | first failing binary: tests | time |"
  echo "|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
  echo
  echo "Caught $caught of ${#wanted[@]}."
} | tee "$out/results.md"
