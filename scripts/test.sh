#!/usr/bin/env bash
# The README's test command: set up the Postgres versions (pgrx-config/setup.sh), lint the
# workspace with clippy, then run the whole suite (unit, #[pg_test] and integration tests) on
# each version (pgrx-config/test.sh).
# Usage: scripts/test.sh [MAJOR ...]   (default: every version in pgrx-config/versions)
set -euo pipefail
cd "$(dirname "$0")/.."
pgrx-config/setup.sh "$@"

# Clippy, every warning an error (the lints are Cargo.toml's [workspace.lints]), once: on pg16
# if it is among the majors tested (all are by default), else on the first one given. It shares
# CARGO_TARGET_DIR with the tests (dependencies' build scripts, pgrx-pg-sys' bindings included,
# are not redone): a check of the dependencies the first time (minutes), then of this workspace
# (about a minute). A warning stops the run here, before the matrix.
lint_major=16
if [ $# -gt 0 ] && ! printf '%s\n' "${@#pg}" | grep -qx 16; then lint_major=${1#pg}; fi
printf '\n==================== clippy (pg%s) ====================\n' "$lint_major"
cargo clippy --all-targets --no-default-features --features "pg$lint_major pg_test" -- -D warnings
cargo clippy -p idem-canonical --all-targets -- -D warnings

exec pgrx-config/test.sh "$@"
