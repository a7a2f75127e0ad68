#!/usr/bin/env bash
# idem_canonical of a ~1 MiB jsonb document of nested arrays at several nesting depths, the
# native extension against the portable edition (portable/canonical.sql), in one run: a
# throwaway cluster, database `native` with the extension, database `portable` with the script.
# The document is an array of copies of one chain [[...[1]...]] `depth` deep, as many as fill
# SIZE bytes. Prints the canonical text's bytes, milliseconds per call (one call, after a
# warm-up call on a small document) and portable / native. A portable call that passes
# TIMEOUT_S seconds is cancelled and shown as "> TIMEOUT_S000" (the ratio a lower bound).
# Usage: bench/canonical-depth.sh PG_CONFIG [depths="10 1000 10000"]   (SIZE, TIMEOUT_S, PORT, WORK override)
# The extension must be installed in that Postgres (cargo pgrx install --pg-config ...).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
PG_CONFIG=${1:?usage: bench/canonical-depth.sh PG_CONFIG [depths]}
depths=${2:-10 1000 10000}
size=${SIZE:-1048576}
timeout_s=${TIMEOUT_S:-300}
bindir=$("$PG_CONFIG" --bindir)
port=${PORT:-55320}
work=${WORK:-/var/tmp/idem-canonical-depth-$$}

as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
mkdir -p "$work"
if [ "$(id -u)" = 0 ]; then chown postgres "$work"; fi
stop() {
  as_pg "$bindir/pg_ctl" -D "$work/data" -m fast stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap stop EXIT
as_pg "$bindir/initdb" -D "$work/data" -A trust -U postgres -E UTF8 --locale=C >/dev/null
as_pg env -u RUST_BACKTRACE "$bindir/pg_ctl" -D "$work/data" -l "$work/log" -w \
  -o "-p $port -k $work -c listen_addresses= -c shared_preload_libraries=idempotency" start >/dev/null
psql() { "$bindir/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$work" -p "$port" -U postgres "$@"; }

setup="CREATE FUNCTION deep_doc(d int, size int) RETURNS jsonb LANGUAGE sql AS \$\$
  SELECT ('[' || array_to_string(array_fill(repeat('[', d - 1) || '1' || repeat(']', d - 1),
          ARRAY[greatest(1, size / (2 * d))]), ',') || ']')::jsonb \$\$;
  CREATE FUNCTION bench_ms(q text) RETURNS numeric LANGUAGE plpgsql AS \$\$
  DECLARE t0 timestamptz := clock_timestamp();
  BEGIN EXECUTE q; RETURN round((extract(epoch FROM clock_timestamp() - t0) * 1e3)::numeric, 1);
  EXCEPTION WHEN query_canceled THEN RETURN NULL; END \$\$;
  CREATE TABLE docs (depth int PRIMARY KEY, doc jsonb);"
for db in native portable; do
  psql -d postgres -c "CREATE DATABASE $db"
  psql -d "$db" -c "$setup"
  for d in $depths; do psql -d "$db" -c "INSERT INTO docs SELECT $d, deep_doc($d, $size)"; done
done
psql -d native -c "CREATE EXTENSION idempotency"
psql -d portable -c "CREATE SCHEMA idempotency" -f "$repo/portable/canonical.sql"

echo "Postgres $("$PG_CONFIG" --version), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); size=$size timeout=${timeout_s}s"
printf '%-7s %-9s %12s %12s %9s\n' depth bytes native_ms portable_ms ratio
for d in $depths; do
  bytes=$(psql -d native -c "SELECT octet_length(public.idem_canonical(doc)) FROM docs WHERE depth = $d")
  ms=()
  for ed in native:public portable:idempotency; do
    db=${ed%%:*} schema=${ed#*:}
    ms+=("$(psql -d "$db" -c "SET jit = off" -c "SET statement_timeout = '${timeout_s}s'" \
      -c "SELECT length($schema.idem_canonical('[[1]]'::jsonb))" \
      -c "SELECT coalesce(bench_ms(\$q\$SELECT length($schema.idem_canonical(doc)) FROM docs WHERE depth = $d\$q\$)::text, '')" | tail -1)")
  done
  native=${ms[0]} portable=${ms[1]}
  if [ -z "$portable" ]; then
    printf '%-7s %-9s %12s %12s %9s\n' "$d" "$bytes" "$native" "> ${timeout_s}000" \
      "> $(awk -v p="${timeout_s}000" -v n="$native" 'BEGIN { printf "%.0f", p / n }')"
  else
    printf '%-7s %-9s %12s %12s %9s\n' "$d" "$bytes" "$native" "$portable" \
      "$(awk -v p="$portable" -v n="$native" 'BEGIN { printf "%.1f", p / n }')"
  fi
done
