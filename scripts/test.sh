#!/usr/bin/env bash
# The README's test command: set up the Postgres versions (pgrx-config/setup.sh), lint the
# workspace with clippy, then run the whole suite (unit, #[pg_test] and integration tests) on
# each version (pgrx-config/test.sh).
# Usage: scripts/test.sh [MAJOR ...]   (default: every version in pgrx-config/versions)
set -euo pipefail
cd "$(dirname "$0")/.."
pgrx-config/setup.sh "$@"

# Clippy, every warning an error (the lints are Cargo.toml's [workspace.lints]), once: on the
# first major given, else pgrx-config/versions' first line. It shares CARGO_TARGET_DIR with the
# tests (dependencies' build scripts, pgrx-pg-sys' bindings included, are not redone), so it
# costs a check of this workspace, about a minute. A warning stops the run here, before the
# matrix.
lint_major=${1:-$(awk '$1 !~ /^#/ && NF { print $1; exit }' pgrx-config/versions)}
lint_major=${lint_major#pg}
printf '\n==================== clippy (pg%s) ====================\n' "$lint_major"
cargo clippy --all-targets --no-default-features --features "pg$lint_major pg_test" -- -D warnings
cargo clippy -p idem-canonical --all-targets -- -D warnings

exec pgrx-config/test.sh "$@"
