#!/usr/bin/env bash
# The mutation campaign (issue #16, part 6; docs/mutants.md): does the test suite catch real
# bugs? Each curated mutation of scripts/mutants/mutations.txt plays one plausible bug in the
# protocol's decisions; this applies them one at a time, rebuilds the extension, runs the
# tests named to catch it on one Postgres version (16), and restores the source. A mutation
# counts as caught only if a test *failed*; a build failure or a harness that ran no test is
# reported apart and not counted either way. Run by hand; it is not part of CI.
#
# Usage: scripts/mutants.sh [--check | --list | NAME ...]
#   --check   only check that every mutation still applies exactly (seconds; no build)
#   --list    the mutations, their tests and files
#   NAME ...  run only these mutations (default: all)
#
# What it needs (see docs/setup.md and docs/mutants.md):
#   - Postgres 16 set up for cargo-pgrx (pgrx-config/setup.sh 16): `pg16` in
#     $PGRX_HOME/config.toml (default ~/.pgrx), or IDEM_MUT_PG_CONFIG=/path/to/pg_config.
#     The extension is installed into that Postgres: use a private copy if others test there.
#   - root or the server's OS user (IDEM_RUNAS, default postgres) as for pgrx-config/test.sh.
# Environment: CARGO_TARGET_DIR (default ./target), IDEM_MUT_PGDATA (default
#   /var/tmp/idem-mut-pgdata), IDEM_MUT_TIMEOUT (seconds per mutation's tests, default 300).
#
# How (so that a mutation costs one incremental build: 5-31 s per mutation here):
#   1. the test binaries (the library's #[pg_test] harness and the tests/ binaries) are built once; the
#      extension is installed once with `cargo pgrx install --test` (library + SQL);
#   2. a baseline: every test any mutation names must pass on the unmutated code;
#   3. per mutation: apply its edits (each must match exactly as often as the list says, else
#      the campaign stops before building anything), `cargo build --lib` as cargo-pgrx builds
#      the extension, copy the library into the Postgres' pkglibdir, run the named tests;
#      the #[pg_test]s run inside Postgres, so the harness built in step 1 runs them against
#      the mutated library (its own install step is skipped: CARGO_PGRX is a no-op here);
#   4. the source is restored after each mutation and on any exit (trap), its checksums are
#      checked at the end, and the unmutated library is installed again.
# Output: a table and a score; the same in Markdown in $CARGO_TARGET_DIR/mutants/results.md,
# each mutation's log in $CARGO_TARGET_DIR/mutants/logs/. Exit status 0 if every mutation ran
# and was caught, 1 if some survived, 2 if the campaign could not run as defined.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
cd "$repo"
list=$here/mutants/mutations.txt
apply() { python3 "$here/mutants/apply.py" "$list" "$@"; }

case "${1:-}" in
  --check) apply check; exit $? ;;
  --list) apply list | column -t -s $'\t'; exit $? ;;
  -h | --help) sed -n '2,35p' "$0"; exit 0 ;;
esac

apply check >/dev/null || { echo "mutants: the list does not apply to this source (above); fix scripts/mutants/mutations.txt" >&2; exit 2; }
mapfile -t all < <(apply list | cut -f1)
wanted=("$@")
[ ${#wanted[@]} -gt 0 ] || wanted=("${all[@]}")
for name in "${wanted[@]}"; do
  printf '%s\n' "${all[@]}" | grep -qx -- "$name" || { echo "mutants: no mutation $name (--list)" >&2; exit 2; }
done

MAJOR=16
FEATURES="pg$MAJOR pg_test"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$repo/target}
PGRX_CONFIG=${PGRX_HOME:-$HOME/.pgrx}/config.toml
PG_CONFIG=${IDEM_MUT_PG_CONFIG:-$(sed -n "s/^pg$MAJOR = \"\(.*\)\"\$/\1/p" "$PGRX_CONFIG" 2>/dev/null)}
[ -n "$PG_CONFIG" ] && [ -x "$PG_CONFIG" ] || { echo "mutants: no pg$MAJOR pg_config (set IDEM_MUT_PG_CONFIG or run pgrx-config/setup.sh $MAJOR)" >&2; exit 2; }
PKGLIBDIR=$("$PG_CONFIG" --pkglibdir)
RUNAS=${IDEM_RUNAS:-postgres}
PGDATA_DIR=${IDEM_MUT_PGDATA:-/var/tmp/idem-mut-pgdata}
TIMEOUT=${IDEM_MUT_TIMEOUT:-300}
out=$CARGO_TARGET_DIR/mutants
logs=$out/logs
mkdir -p "$logs"
# The #[pg_test] harness installs the extension through `$CARGO_PGRX pgrx install`: here the
# library was copied already, so that step does nothing.
noop=$out/no-install
printf '#!/bin/sh\nexit 0\n' >"$noop" && chmod +x "$noop"
# As `cargo pgrx test` sets them for the harness (cargo-pgrx's command/test.rs).
test_env=(env -u RUST_BACKTRACE CARGO_PGRX="$noop" PGRX_FEATURES="$FEATURES"
  PGRX_NO_DEFAULT_FEATURES=true PGRX_ALL_FEATURES=false PGRX_BUILD_PROFILE=dev PGRX_NO_SCHEMA=false
  CARGO_PGRX_TEST_PGDATA="$PGDATA_DIR" CARGO_MANIFEST_DIR="$repo" USER="${USER:-$(id -un)}"
  IDEM_PG_MAJOR=$MAJOR IDEM_PG_CONFIG="$PG_CONFIG")
[ "$(id -u)" = 0 ] && test_env+=(CARGO_PGRX_TEST_RUNAS="$RUNAS")
# As cargo-pgrx builds the extension (command/install.rs), so that its artifacts are reused.
gc_config='target.'"'"'cfg(all(target_family = "unix", not(target_os = "macos")))'"'"'.rustflags = ["-C", "link-arg=-Wl,--no-gc-sections"]'

# --- restoring the source ---------------------------------------------------------------------
# Checksums of every file a mutation edits, checked again at the end.
sums=$(apply list | cut -f3 | tr ' ' '\n' | sort -u | xargs sha256sum)
backup=$(mktemp -d)
backed=()
restore() {
  local f
  # A fresh mtime (no cp -p): cargo must see the file changed again, or it keeps the mutated
  # build of a crate that no later mutation touches (crates/idem-canonical, at the end).
  for f in "${backed[@]}"; do cp "$backup/$(echo "$f" | tr / %)" "$f" && touch "$f"; done
  backed=()
}
cleanup() { restore; rm -rf "$backup"; }
trap cleanup EXIT
trap 'echo "mutants: interrupted; source restored" >&2; exit 130' INT TERM

mutate() { # NAME -> its files backed up, its edits applied
  local f
  for f in $(apply list | awk -F'\t' -v n="$1" '$1 == n {print $3}'); do
    cp "$f" "$backup/$(echo "$f" | tr / %)"
    backed+=("$f")
  done
  apply apply "$1"
}

# --- building ---------------------------------------------------------------------------------
build_library() { # LOG -> the library built and copied into the pkglibdir
  cargo --config "$gc_config" build --lib --no-default-features --features "$FEATURES" >>"$1" 2>&1 || return 1
  rm -f "$PKGLIBDIR/idempotency.so" && cp "$CARGO_TARGET_DIR/debug/libidempotency.so" "$PKGLIBDIR/idempotency.so"
}

declare -A BIN # test target name ("lib", "integration", "clusters", "layers") -> executable
build_tests() {
  local log=$logs/_build-tests.log json
  echo "mutants: building the test binaries (log: $log)"
  json=$(cargo test --no-run --no-default-features --features "$FEATURES" --lib --tests \
    --message-format=json 2>>"$log") || { echo "mutants: the tests do not build (see $log)" >&2; exit 2; }
  while IFS=$'\t' read -r kind name exe; do
    [ "$kind" = lib ] && name=lib
    BIN[$name]=$exe
  done < <(printf '%s\n' "$json" | python3 -c '
import json, sys
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m.get("profile", {}).get("test"):
        t = m["target"]
        print(("lib" if "lib" in t["kind"] or "cdylib" in t["kind"] else "test") + "\t" + t["name"] + "\t" + m["executable"])')
  [ -n "${BIN[lib]:-}" ] || { echo "mutants: no library test harness found" >&2; exit 2; }
}

# --- running the tests a mutation names ---------------------------------------------------------
# -> "failed" (some test failed), "passed", "error" (no test ran / harness broke), "timeout"
run_tests() { # "SPEC ..." LOG
  local spec=$1 log=$2 pg=() item bin filter rc any_failed=0 any_error=0
  declare -A its=()
  for item in $spec; do
    case "$item" in
      pg:*) pg+=("${item#pg:}") ;;
      it:*) item=${item#it:}; bin=${item%%:*}; filter=${item#"$bin"}; filter=${filter#:}
        # An empty filter ("it:BINARY") runs every test of the binary.
        if [ -z "$filter" ] || [ "${its[$bin]-x}" = "" ]; then its[$bin]=""; else its[$bin]="${its[$bin]:-} $filter"; fi ;;
      *) echo "mutants: bad test spec $item" >&2; exit 2 ;;
    esac
  done
  run_one() { # EXE FILTERS... -> this run's verdict; its output appended to the log
    local exe=$1 part=$log.part result ran
    shift
    echo "+ $(basename "$exe") $*" >>"$log"
    timeout "$TIMEOUT" "${test_env[@]}" "$exe" --test-threads 2 "$@" >"$part" 2>&1
    rc=$?
    cat "$part" >>"$log"
    if [ $rc -eq 124 ]; then echo "timeout"; return; fi
    result=$(grep -a 'test result:' "$part" | tail -1)
    ran=$(grep -a -oE '^running [0-9]+ tests?' "$part" | tail -1 | grep -oE '[0-9]+')
    if [ "${ran:-0}" -eq 0 ]; then echo "error"; return; fi
    if [ $rc -eq 0 ]; then echo "passed"; return; fi
    if [[ "$result" =~ \ [1-9][0-9]*\ failed ]]; then echo "failed"; return; fi
    # Non-zero without a count of failed tests: the test process aborted (a crashed harness
    # or backend). A test that dies under the mutation failed; anything else is an error.
    if grep -aqE '^test .* \.\.\. FAILED|panicked' "$part"; then echo "failed"; else echo "error"; fi
  }
  local verdicts=()
  if [ ${#pg[@]} -gt 0 ]; then verdicts+=("$(run_one "${BIN[lib]}" "${pg[@]}")"); fi
  for bin in "${!its[@]}"; do
    [ -n "${BIN[$bin]:-}" ] || { echo "mutants: no test binary $bin" >&2; exit 2; }
    # shellcheck disable=SC2086 # filters are words (none: every test)
    verdicts+=("$(run_one "${BIN[$bin]}" ${its[$bin]})")
  done
  local v
  for v in "${verdicts[@]}"; do [ "$v" = failed ] && { echo failed; return; }; done
  for v in "${verdicts[@]}"; do [ "$v" = timeout ] && { echo timeout; return; }; done
  for v in "${verdicts[@]}"; do [ "$v" = error ] && { echo error; return; }; done
  echo passed
}

# --- the campaign -------------------------------------------------------------------------------
t0=$SECONDS
build_tests
log=$logs/_baseline.log
: >"$log"
echo "mutants: installing the unmutated extension (cargo pgrx install --test; log: $log)"
env -u RUST_BACKTRACE cargo pgrx install --test --pg-config "$PG_CONFIG" --no-default-features \
  --features "$FEATURES" >>"$log" 2>&1 || { echo "mutants: install failed (see $log)" >&2; exit 2; }
build_library "$log" || { echo "mutants: the unmutated library does not build (see $log)" >&2; exit 2; }
declare -A SPEC
while IFS=$'\t' read -r name spec _; do SPEC[$name]=$spec; done < <(apply list)
union=$(for n in "${wanted[@]}"; do echo "${SPEC[$n]}"; done | tr ' ' '\n' | sort -u | tr '\n' ' ')
echo "mutants: baseline: the named tests on the unmutated code ($union)"
verdict=$(run_tests "$union" "$log")
[ "$verdict" = passed ] || { echo "mutants: the baseline did not pass ($verdict; see $log): fix the tests first" >&2; exit 2; }
echo "mutants: baseline passed in $((SECONDS - t0)) s; ${#wanted[@]} mutations"

rows=() caught=0 survived=0 invalid=0
for name in "${wanted[@]}"; do
  log=$logs/$name.log
  : >"$log"
  start=$SECONDS
  if ! mutate "$name" >>"$log" 2>&1; then
    restore
    echo "mutants: $name did not apply (see $log)" >&2
    exit 2
  fi
  git diff --no-color -- $(apply list | awk -F'\t' -v n="$name" '$1 == n {print $3}') >>"$log"
  if build_library "$log"; then
    verdict=$(run_tests "${SPEC[$name]}" "$log")
  else
    verdict="build failed"
  fi
  restore
  case "$verdict" in
    failed) result="caught" caught=$((caught + 1)) ;;
    timeout) result="caught (timeout)" caught=$((caught + 1)) ;;
    passed) result="SURVIVED" survived=$((survived + 1)) ;;
    *) result="INVALID ($verdict)" invalid=$((invalid + 1)) ;;
  esac
  secs=$((SECONDS - start))
  printf 'mutants: %-24s %-18s %4ss  %s\n' "$name" "$result" "$secs" "${SPEC[$name]}"
  rows+=("$name|$result|$secs|${SPEC[$name]}")
done

echo "mutants: installing the unmutated library again"
build_library "$logs/_restore.log" || echo "mutants: WARNING: could not rebuild the unmutated library (see $logs/_restore.log)" >&2

sha256sum --quiet -c - <<<"$sums" || { echo "mutants: the source was not restored (above)" >&2; exit 2; }

total=$((caught + survived))
score=$(awk -v c=$caught -v t=$total 'BEGIN { if (t) printf "%.1f", 100 * c / t; else print "n/a" }')
{
  echo "| mutation | result | seconds | tests |"
  echo "|---|---|---:|---|"
  for row in "${rows[@]}"; do
    IFS='|' read -r n r s t <<<"$row"
    echo "| \`$n\` | $r | $s | \`$t\` |"
  done
  echo
  echo "Score: $caught of $total caught ($score %); $invalid invalid; $((SECONDS - t0)) s in all (Postgres $MAJOR, $(date -u +%Y-%m-%d))."
} >"$out/results.md"
echo
column -t -s '|' < <(printf '%s\n' "mutation|result|seconds|tests" "${rows[@]}")
echo
echo "Score: $caught of $total caught ($score %); $invalid invalid; $((SECONDS - t0)) s in all. Markdown: $out/results.md"
[ $invalid -eq 0 ] || exit 2
[ $survived -eq 0 ] || exit 1
exit 0
