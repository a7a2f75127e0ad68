#!/usr/bin/env bash
# The README's test command: set up the Postgres versions (pgrx-config/setup.sh), lint the
# workspace with clippy, then run the whole suite (unit, #[pg_test] and integration tests) on
# each version (pgrx-config/test.sh).
# Usage: scripts/test.sh [MAJOR ...]   (default: every version in pgrx-config/versions)
set -euo pipefail
cd "$(dirname "$0")/.."
pgrx-config/setup.sh "$@"

# Clippy, every warning an error (the lints are Cargo.toml's [workspace.lints]). Warnings depend
# on the major (cfg'd code, pg_sys items) and on the features, so: pg16 as the tests build it
# (pg_test, all targets), and the library as users build it (no pg_test: what demo.sh and
# package.sh compile) on the oldest, pg16 and the newest major tested. It shares
# CARGO_TARGET_DIR with the tests: a check of the dependencies the first time (minutes), then
# about a minute each. A warning stops the run here, before the matrix.
majors=("${@#pg}")
[ ${#majors[@]} -gt 0 ] || mapfile -t majors < <(awk '$1 ~ /^[0-9]+$/ {print $1}' pgrx-config/versions)
sorted=$(printf '%s\n' "${majors[@]}" | sort -n)
full=$(printf '%s\n' "${majors[@]}" | grep -x 16 || printf '%s\n' "$sorted" | head -1)
printf '\n==================== clippy (pg%s, tests) ====================\n' "$full"
cargo clippy --all-targets --no-default-features --features "pg$full pg_test" -- -D warnings
for m in $( (printf '%s\n' "$sorted" | sed -n '1p;$p'; echo "$full") | sort -nu); do
  printf '\n==================== clippy (pg%s, library) ====================\n' "$m"
  cargo clippy --lib --no-default-features --features "pg$m" -- -D warnings
done
cargo clippy -p idem-canonical --all-targets -- -D warnings
cargo clippy -p idem-protocol --all-targets -- -D warnings

exec pgrx-config/test.sh "$@"
