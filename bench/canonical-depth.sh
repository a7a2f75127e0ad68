#!/usr/bin/env bash
# idem_canonical of a ~1 MiB jsonb document at several nesting depths, the native extension
# against the portable edition (scripts/portable.sh --pure), in one run: a throwaway cluster,
# database `native` with the extension, database `portable` with the script. The document is
# an array of copies of one chain `depth` deep, as many as fill SIZE bytes: of arrays
# [[...[1]...]] and of objects {"a":{"a":...1...}}; and shape `records` (depth 2 only), an
# array of request-like objects of 10 members whose names need reordering (jsonb sorts them
# by length first), with decimals such as 12.50 and strings holding ", " and ": ". Prints the
# canonical text's bytes, milliseconds per call (the median of RUNS calls, 5, after warm-up
# calls on three small documents: one the portable fast path takes, an object and a list of
# records it walks) and portable / native. Shape `varied` is `records` where every third
# record has one more member (the names differ from record to record) and each holds a
# nested object of 3 members. Not by default, two shapes that defeat the portable fast path:
# `onetail` (`arrays` and one 1.50 at the end: it fails at the top only) and `tails` (`arrays`
# with 1.50 at the bottom of every chain: it fails at every level). A call
# that is refused shows its SQLSTATE after its milliseconds (past the depth limit: 54001 in
# both); a portable call that passes TIMEOUT_S seconds is cancelled and shown as
# "> TIMEOUT_S000" (the ratio a lower bound).
# Usage: bench/canonical-depth.sh PG_CONFIG [depths="10 128 129 1000 10000"] [shapes="arrays objects records varied"]
#        (SIZE, TIMEOUT_S, RUNS, PORT, WORK override; shapes also "onetail tails")
# The extension must be installed in that Postgres (cargo pgrx install --pg-config ...).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
PG_CONFIG=${1:?usage: bench/canonical-depth.sh PG_CONFIG [depths] [shapes]}
depths=${2:-10 128 129 1000 10000}
shapes=${3:-arrays objects records varied}
size=${SIZE:-1048576}
timeout_s=${TIMEOUT_S:-300}
runs=${RUNS:-5}
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

# deep_doc: SIZE bytes of copies of `open` x d || '1' || `close` x d (the last chain may be cut
# short of SIZE by the division; every chain is exactly d deep).
setup="CREATE FUNCTION deep_doc(d int, size int, open text, close text, leaf text DEFAULT '1', tail text DEFAULT '')
  RETURNS jsonb LANGUAGE sql AS \$\$
  SELECT ('[' || array_to_string(array_fill(repeat(open, d - 1) || leaf || repeat(close, d - 1),
          ARRAY[greatest(1, size / ((length(open) + length(close)) * d))]), ',') || tail || ']')::jsonb \$\$;
  CREATE FUNCTION records_doc(size int) RETURNS jsonb LANGUAGE sql AS \$\$
  SELECT jsonb_agg(jsonb_build_object('id', i, 'amount', round(i * 7.31, 2), 'currency', 'EUR',
           'customer_email', 'user' || i || '@example.com', 'qty', i % 17, 'note', 'a, b: \"c\"',
           'created_at', '2026-11-28T13:48:44Z', 'ok', i % 2 = 0, 'x', null, 'price', 12.50) ORDER BY i)
  FROM generate_series(1, greatest(1, size / 205)) i \$\$;
  CREATE FUNCTION varied_doc(size int) RETURNS jsonb LANGUAGE sql AS \$\$
  SELECT jsonb_agg(jsonb_build_object('id', i, 'amount', round(i * 7.31, 2), 'currency', 'EUR',
           'customer', jsonb_build_object('email', 'user' || i || '@example.com', 'tier', i % 3, 'since', 2019 + i % 7),
           'qty', i % 17, 'note', 'a, b: \"c\"', 'created_at', '2026-11-28T13:48:44Z', 'ok', i % 2 = 0, 'price', 12.50)
         || CASE WHEN i % 3 = 0 THEN jsonb_build_object('coupon', 'X' || i) ELSE '{}' END ORDER BY i)
  FROM generate_series(1, greatest(1, size / 240)) i \$\$;
  CREATE FUNCTION bench_ms(q text, runs int) RETURNS text LANGUAGE plpgsql AS \$\$
  DECLARE t0 timestamptz; ms float8[] := '{}';
  BEGIN
    FOR i IN 1..runs LOOP
      t0 := clock_timestamp(); EXECUTE q;
      ms := ms || extract(epoch FROM clock_timestamp() - t0)::float8 * 1e3;
    END LOOP;
    RETURN round((SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY m) FROM unnest(ms) m)::numeric, 1)::text;
  EXCEPTION WHEN query_canceled THEN RETURN '';
    WHEN OTHERS THEN RETURN round((extract(epoch FROM clock_timestamp() - t0) * 1e3)::numeric, 1)::text
                            || ' ' || SQLSTATE; END \$\$;
  CREATE TABLE docs (shape text, depth int, doc jsonb, PRIMARY KEY (shape, depth));"
for db in native portable; do
  psql -d postgres -c "CREATE DATABASE $db"
  psql -d "$db" -c "$setup"
  for s in $shapes; do
    case $s in
      arrays | onetail | tails) open='[' close=']' ;;
      objects) open='{"a":' close='}' ;;
      records) psql -d "$db" -c "INSERT INTO docs SELECT 'records', 2, records_doc($size)"; continue ;;
      varied) psql -d "$db" -c "INSERT INTO docs SELECT 'varied', 3, varied_doc($size)"; continue ;;
      *) echo "unknown shape $s" >&2; exit 2 ;;
    esac
    for d in $depths; do
      leaf=1 tail=
      if [ "$s" = tails ]; then leaf=1.50; fi
      if [ "$s" = onetail ]; then tail=,1.50; fi
      psql -d "$db" -c "INSERT INTO docs SELECT '$s', $d, deep_doc($d, $size, \$o\$$open\$o\$, '$close', '$leaf', '$tail')"
    done
  done
done
psql -d native -c "CREATE EXTENSION idempotency"
"$repo/scripts/portable.sh" --pure | psql -d portable -c "CREATE SCHEMA idempotency" -f -

echo "Postgres $("$PG_CONFIG" --version), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); size=$size timeout=${timeout_s}s"
printf '%-8s %-7s %-9s %14s %14s %9s\n' shape depth bytes native_ms portable_ms ratio
for s in $shapes; do
  ds=$depths
  if [ "$s" = records ]; then ds=2; fi
  if [ "$s" = varied ]; then ds=3; fi
  for d in $ds; do
    bytes=$(psql -d native -c "SELECT octet_length(public.idem_canonical(doc)) FROM docs WHERE shape = '$s' AND depth = $d" 2>/dev/null || echo refused)
    ms=()
    for ed in native:public portable:idempotency; do
      db=${ed%%:*} schema=${ed#*:}
      ms+=("$(psql -d "$db" -c "SET jit = off" -c "SET statement_timeout = '${timeout_s}s'" \
        -c "SELECT length($schema.idem_canonical('[[1]]'::jsonb)), length($schema.idem_canonical('{\"bb\": [1.50], \"a\": 1}'::jsonb)),
                   length($schema.idem_canonical('[{\"bb\": 1.50, \"a\": 1}, {\"bb\": 2, \"a\": 3}]'::jsonb))" \
        -c "SELECT bench_ms(\$q\$SELECT length($schema.idem_canonical(doc)) FROM docs WHERE shape = '$s' AND depth = $d\$q\$, $runs)" | tail -1)")
    done
    native=${ms[0]} portable=${ms[1]}
    if [ -z "$portable" ]; then
      portable="> ${timeout_s}000"
      ratio="> $(awk -v p="${timeout_s}000" -v n="${native%% *}" 'BEGIN { printf "%.0f", p / n }')"
    else
      ratio=$(awk -v p="${portable%% *}" -v n="${native%% *}" 'BEGIN { printf "%.1f", p / n }')
    fi
    printf '%-8s %-7s %-9s %14s %14s %9s\n' "$s" "$d" "$bytes" "$native" "$portable" "$ratio"
  done
done
