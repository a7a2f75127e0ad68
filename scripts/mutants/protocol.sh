#!/usr/bin/env bash
# The decision mutations that live in crates/idem-protocol, against that crate alone: each
# mutation of scripts/mutants/mutations.txt whose edits are all in crates/idem-protocol/ is
# applied to a copy of the crate, and `cargo test` there must fail. No Postgres, no install:
# seconds per mutation (docs/mutants.md). The same mutations stay in the list for
# scripts/mutants.sh, which shows the extension's own tests catch them too.
#
# Usage: scripts/mutants/protocol.sh [NAME ...]   (default: every crate mutation)
# Environment: CARGO_TARGET_DIR (default ./target); the copy builds in its protocol-mutants/.
#   IDEM_PROTOCOL_TESTS: which tests (cargo test's target options, e.g. "--test properties";
#   default: all of the crate's).
# Exit status: 0 if every mutation was caught, 1 if some survived, 2 if it could not run.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
list=$here/mutations.txt
apply() { python3 "$here/apply.py" "$list" "$@"; }
cd "$repo"
apply check >/dev/null || exit 2
mapfile -t all < <(apply list | awk -F'\t' '{ n = split($3, f, " "); ok = 1
  for (i = 1; i <= n; i++) if (f[i] !~ /^crates\/idem-protocol\//) ok = 0
  if (ok) print $1 }')
wanted=("$@")
[ ${#wanted[@]} -gt 0 ] || wanted=("${all[@]}")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$repo/target}/protocol-mutants
# A workspace of the crate alone (its lints come from the workspace), with the repository's
# Cargo.lock so that the same dependency versions build offline.
fresh_copy() {
  rm -rf "$work/crates" && mkdir -p "$work/crates" && cp -r crates/idem-protocol "$work/crates/"
  touch "$work"/crates/idem-protocol/src/*.rs
}
{ printf '[workspace]\nmembers = ["crates/idem-protocol"]\nresolver = "3"\n\n'
  sed -n '/^\[workspace.lints.rust\]/,$p' Cargo.toml; } >"$work/Cargo.toml"
cp Cargo.lock "$work/"
# shellcheck disable=SC2086 # IDEM_PROTOCOL_TESTS is cargo test's arguments, as words
run_tests() { (cd "$work" && env -u RUST_BACKTRACE cargo test -q -p idem-protocol ${IDEM_PROTOCOL_TESTS:-} >"$1" 2>&1); }

t0=$SECONDS
fresh_copy
run_tests "$work/baseline.log" || { cat "$work/baseline.log" >&2; echo "protocol mutants: the unmutated crate fails its tests" >&2; exit 2; }
echo "protocol mutants: baseline passed in $((SECONDS - t0)) s; ${#wanted[@]} mutations"

caught=0 survived=() t1=$SECONDS
for name in "${wanted[@]}"; do
  fresh_copy
  start=$SECONDS
  (cd "$work" && apply apply "$name") || exit 2
  if run_tests "$work/$name.log"; then
    survived+=("$name")
    printf '%-26s SURVIVED (%s s)\n' "$name" $((SECONDS - start))
  else
    grep -q 'error\[E' "$work/$name.log" && { echo "protocol mutants: $name does not build" >&2; exit 2; }
    grep -qE '^test .* FAILED|^---- .* stdout ----' "$work/$name.log" || { cat "$work/$name.log" >&2; echo "protocol mutants: $name: cargo test failed, but no test did" >&2; exit 2; }
    caught=$((caught + 1))
    by=$(grep -m1 -oE '^---- [^ ]+' "$work/$name.log" | cut -c6-)
    printf '%-26s caught   (%s s) by %s\n' "$name" $((SECONDS - start)) "$by"
  fi
done
echo "protocol mutants: $caught of ${#wanted[@]} caught in $((SECONDS - t1)) s (baseline and first build $((t1 - t0)) s)"
[ ${#survived[@]} -eq 0 ] || { echo "survived: ${survived[*]}"; exit 1; }
