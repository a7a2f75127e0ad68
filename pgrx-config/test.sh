#!/usr/bin/env bash
# Runs the whole test suite (unit + #[pg_test] + tests/) on each Postgres version, one after
# the other, sharing one target dir, and prints a summary table.
#
# Usage: pgrx-config/test.sh [MAJOR ...]     e.g.  pgrx-config/test.sh 15 17
#        (default: every version in pgrx-config/versions; set them up first with
#         pgrx-config/setup.sh, same arguments)
#
# Per version: env -u RUST_BACKTRACE cargo pgrx test pgNN --runas postgres --pgdata DIR
#   cargo-pgrx swaps the default `pg15` feature for `pgNN` by itself (--no-default-features
#   --features "pgNN pg_test"), so no feature flags are passed here. Postgres runs as the
#   `postgres` OS user (initdb refuses root); DIR=/var/tmp/idempotency-pgdata/pgNN is owned by
#   it, and pgrx makes a fresh NN-PID cluster inside it per run and removes it afterwards.
#   RUST_BACKTRACE is dropped because pgrx appends Rust backtraces to error DETAILs when set.
#   RUST_TEST_THREADS=4 (unless set): each test binary runs four tests at a time; they mostly
#   wait on their sessions, and on 2 cores this halves the row (docs/developing.md).
#   Integration tests (tests/integration/, tests/clusters/) that start a server of their own find
#   the version under test in IDEM_PG_MAJOR (e.g. 17) and IDEM_PG_CONFIG (its pg_config;
#   `--bindir` gives initdb/pg_ctl).
# Before the versions: the workspace's Postgres-independent crates, once (cargo test).
#
# Output: one banner per version, then a table (tests passed, failed, and skipped: the ones a
# row cannot run are #[ignore]d with their reason, build.rs); the same table in Markdown, with
# the skipped tests of each row and why, in $CARGO_TARGET_DIR/matrix-summary.md, and full logs
# in $CARGO_TARGET_DIR/matrix-logs/.
# Exit status: non-zero if any version failed (or was not set up).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
cd "$repo"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$repo/target}
PGDATA_ROOT=${IDEM_PGDATA_ROOT:-/var/tmp/idempotency-pgdata}
RUNAS=${IDEM_RUNAS:-postgres}
logs=$CARGO_TARGET_DIR/matrix-logs
summary_md=$CARGO_TARGET_DIR/matrix-summary.md
mkdir -p "$logs"

all=()
while read -r major _; do
  case "$major" in '' | '#'*) continue ;; esac
  all+=("$major")
done <"$here/versions"
versions=("${@#pg}")
[ ${#versions[@]} -gt 0 ] || mapfile -t versions < <(printf '%s\n' "${all[@]}" | sort -n)

config=${PGRX_HOME:-$HOME/.pgrx}/config.toml
rows=() logs_of=() failed=0 passed=0 t_all=$SECONDS

# "test result: ok. 3 passed; 0 failed; 2 ignored; ..." lines of a log -> "PASSED FAILED IGNORED"
# (summed); a log without them (scripts/http-test.sh) -> its closing "N passed, N failed" line.
count_tests() {
  if grep -aqE 'test result: ' "$1"; then
    grep -aoE 'test result: [A-Za-z]+\. [0-9]+ passed; [0-9]+ failed; [0-9]+ ignored' "$1" |
      awk '{p += $4; f += $6; i += $8} END {printf "%d %d %d", p, f, i}'
  else
    sed -n 's/^\([0-9][0-9]*\) passed, \([0-9][0-9]*\) failed$/\1 \2 0/p' "$1" | tail -n 1 | grep . || echo "0 0 0"
  fi
}

# The "test NAME ... ignored, REASON" lines of a log -> "REASON: NAME, NAME" lines, one a reason
skipped_tests() {
  sed -n 's/^test \([^ ]*\) \.\.\. ignored\(, \(.*\)\)\{0,1\}$/\3\t\1/p' "$1" | sort -u |
    awk -F'\t' '{n[$1] = n[$1] (n[$1] == "" ? "" : ", ") "`" $2 "`"} END {for (r in n) print (r == "" ? "no reason given" : r) ": " n[r]}' |
    sort
}

banner() { printf '\n==================== %s ====================\n' "$*"; }

run_one() { # NAME LOG COMMAND... -> runs it, records a row
  local name=$1 log=$2 t0=$SECONDS rc p f i
  shift 2
  "$@" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  read -r p f i <<<"$(count_tests "$log")"
  local secs=$((SECONDS - t0)) result=passed
  if [ "$rc" -ne 0 ]; then result="FAILED (exit $rc)" failed=$((failed + 1)); else passed=$((passed + 1)); fi
  rows+=("$name|$result|$p|$f|$i|$secs")
  logs_of+=("$log")
  printf -- '--- %s: %s in %ss (tests: %s passed, %s failed, %s skipped)\n' "$name" "$result" "$secs" "$p" "$f" "$i"
}

# Postgres-independent crates of the workspace, once.
pure=$(cargo metadata --no-deps --format-version 1 2>/dev/null |
  python3 -c 'import json,sys; print(" ".join(p["name"] for p in json.load(sys.stdin)["packages"] if p["name"] != "idempotency"))' 2>/dev/null || true)
if [ -n "$pure" ]; then
  banner "workspace crates without Postgres: $pure"
  pkgs=()
  for p in $pure; do pkgs+=(-p "$p"); done
  run_one "no Postgres ($pure)" "$logs/pure.log" env -u RUST_BACKTRACE cargo test "${pkgs[@]}"
fi

for v in "${versions[@]}"; do
  pgc=$(sed -n "s/^pg$v = \"\(.*\)\"\$/\1/p" "$config" 2>/dev/null)
  if [ -z "$pgc" ] || [ ! -x "$pgc" ]; then
    banner "pg$v: NOT SET UP"
    echo "pg$v is not in $config (or its pg_config is gone): run pgrx-config/setup.sh $v"
    rows+=("pg$v|FAILED (not set up)|0|0|0|0")
    logs_of+=("")
    failed=$((failed + 1))
    continue
  fi
  pgver=$("$pgc" --version | cut -d' ' -f2)
  install -d -o "$RUNAS" -m 0700 "$PGDATA_ROOT/pg$v"
  chmod 0755 "$PGDATA_ROOT"
  banner "pg$v: PostgreSQL $pgver ($pgc)"
  # tests/clusters/citus.rs builds Citus 14.0.1 (scripts/citus.sh, ~30 s the first time) and runs a
  # coordinator + two workers: on the majors in IDEM_CITUS_MAJORS (default 17; Citus supports
  # 16-18), skipped on the others.
  citus=0
  case " ${IDEM_CITUS_MAJORS-17} " in *" $v "*) citus=1 ;; esac
  # tests/clusters/portable_pg_tle.rs builds pg_tle 1.5.2 (scripts/pg_tle.sh) into a copy of this
  # Postgres without the native files: on the majors in IDEM_PGTLE_MAJORS (default 17).
  pgtle=0
  case " ${IDEM_PGTLE_MAJORS-17} " in *" $v "*) pgtle=1 ;; esac
  run_one "pg$v ($pgver)" "$logs/pg$v.log" \
    env -u RUST_BACKTRACE RUST_TEST_THREADS="${RUST_TEST_THREADS:-4}" \
    IDEM_PG_MAJOR="$v" IDEM_PG_CONFIG="$pgc" IDEM_CITUS="$citus" IDEM_PGTLE="$pgtle" \
    cargo pgrx test "pg$v" --runas "$RUNAS" --pgdata "$PGDATA_ROOT/pg$v"
done

# Suites beyond the per-version matrix, on one version each (docs/setup.md, "What the test
# command runs"): the packages (.deb and tarball on Debian's own PostgreSQL 15, in a private
# mount namespace) and the HTTP adapters with the Prometheus exporter (on 15). The chaos and
# failover tests are integration tests that run inside the pg16 row. IDEM_SKIP_EXTRA=1 skips
# the extra suites (e.g. while iterating on one major).
wants() { [ -z "${IDEM_SKIP_EXTRA:-}" ] && printf '%s\n' "${versions[@]}" | grep -qx "$1"; }
if wants 15 && [ "$(id -u)" = 0 ] && dpkg-query -W postgresql-15 >/dev/null 2>&1; then
  banner "packages: .deb and tarball on Debian's PostgreSQL 15"
  # A debug build: this checks the packaging; releases use the default (release) profile.
  run_one "packages (pg15)" "$logs/packages.log" \
    env IDEM_PACKAGE_PROFILE=dev bash -c 'scripts/package.sh 15 && scripts/package-test.sh 15'
fi

if wants 15; then
  banner "HTTP: Python and Node adapters, example services, Prometheus exporter (pg15)"
  run_one "http (pg15)" "$logs/http.log" scripts/http-test.sh 15
fi

total=$((SECONDS - t_all))
{
  echo "| version | result | tests passed | tests failed | tests skipped | seconds |"
  echo "| --- | --- | ---: | ---: | ---: | ---: |"
  for r in "${rows[@]}"; do echo "| ${r//|/ | } |"; done
  echo
  echo "Skipped (#[ignore]d where they cannot run, with the reason; docs/developing.md):"
  echo
  for k in "${!rows[@]}"; do
    [ -n "${logs_of[k]}" ] && [ -f "${logs_of[k]}" ] || continue
    skipped_tests "${logs_of[k]}" | sed "s/^/- ${rows[k]%%|*}: /"
  done
  echo
  echo "Total: ${total}s; $(date -u '+%Y-%m-%d %H:%M UTC'); commit $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?'); $(nproc) cores."
} >"$summary_md"

banner "summary (also in $summary_md)"
printf '%-28s %-22s %7s %7s %7s %8s\n' version result passed failed skipped seconds
for r in "${rows[@]}"; do
  IFS='|' read -r name result p f i s <<<"$r"
  printf '%-28s %-22s %7s %7s %7s %8s\n' "$name" "$result" "$p" "$f" "$i" "$s"
done
printf 'total %ss\n\n' "$total"
# The plain closing line CI reads, counting rows (Postgres versions + the Postgres-free crates).
echo "matrix: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
