#!/usr/bin/env bash
# The README's test command: set up the Postgres versions (pgrx-config/setup.sh), lint the
# workspace with clippy, then run the whole suite (unit, #[pg_test] and integration tests) on
# each version (pgrx-config/test.sh).
# Usage: scripts/test.sh [MAJOR ...]   (default: every version in pgrx-config/versions)
set -euo pipefail
cd "$(dirname "$0")/.."
pgrx-config/setup.sh "$@"

# Clippy, every warning an error (the lints are Cargo.toml's [workspace.lints]), on the oldest
# and the newest major tested (warnings depend on the major: cfg'd code, pg_sys items) and on
# pg16: each as the tests build it (pg_test, all targets) and as users build it (the library
# alone, no pg_test: what demo.sh and package.sh compile). It shares CARGO_TARGET_DIR with the
# tests (dependencies' build scripts are not redone): a check of the dependencies the first
# time (minutes), then of this workspace (about a minute each). A warning stops the run here.
majors=("${@#pg}")
[ ${#majors[@]} -gt 0 ] || mapfile -t majors < <(awk '$1 ~ /^[0-9]+$/ {print $1}' pgrx-config/versions)
lint=$(printf '%s\n' "${majors[@]}" | sort -n | sed -n '1p;$p'; printf '%s\n' "${majors[@]}" | grep -x 16 || true)
for m in $(printf '%s\n' $lint | sort -nu); do
  printf '\n==================== clippy (pg%s) ====================\n' "$m"
  cargo clippy --all-targets --no-default-features --features "pg$m pg_test" -- -D warnings
  cargo clippy --lib --no-default-features --features "pg$m" -- -D warnings
done
cargo clippy -p idem-canonical --all-targets -- -D warnings

exec pgrx-config/test.sh "$@"
