#!/usr/bin/env bash
# The HTTP adapters' round-trip benchmark (not a test): per framework (FastAPI, Flask, Django,
# Express), the example app's plain insert (POST /plain/payments, no adapter) against the same
# insert through the adapter (POST /payments), new keys and replays, side by side in one run, in
# CPU per request of the app's process plus the cluster's backends. Prints a markdown table.
# Needs: DATABASE_URL, a database with the extension (CREATE EXTENSION idempotency) on a cluster
# of this machine that nothing else uses meanwhile (its postmaster's CPU and its children's are
# counted); python3 with httpx and psycopg (IDEM_BENCH_PYTHON, default python3); node and npm.
# The apps start through examples/http/{python,node}/serve.sh (which install what they need).
# Environment: IDEM_BENCH_N (requests per mode and round, default 1000), IDEM_BENCH_ROUNDS (3),
#              IDEM_BENCH_FRAMEWORKS (default fastapi,flask,django,express), IDEM_BENCH_PORT.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${DATABASE_URL:?set DATABASE_URL}"
exec "${IDEM_BENCH_PYTHON:-python3}" bench/http_roundtrips.py
