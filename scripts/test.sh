#!/usr/bin/env bash
# The README's test command: set up the Postgres versions (pgrx-config/setup.sh), then run the
# whole suite (unit, #[pg_test] and integration tests) on each (pgrx-config/test.sh).
# Usage: scripts/test.sh [MAJOR ...]   (default: every version in pgrx-config/versions)
set -euo pipefail
cd "$(dirname "$0")/.."
pgrx-config/setup.sh "$@"
exec pgrx-config/test.sh "$@"
