#!/usr/bin/env bash
# Portable vs native vs the PL/pgSQL page (bench/reference_plpgsql.sql) vs bare SQL, side by
# side in one run on one server (issue 21): replay, new claim + complete, and idem_hash.
#
#   bench/portable.sh PG_CONFIG [SECONDS] [CLIENTS]      (defaults: 8 s, 2 clients; IDEM_BENCH_ROUNDS=3)
#   IDEM_BENCH_BASELINE=old.sql bench/portable.sh ...    (also an earlier plain script, for before/after)
#
# The server is a throw-away one on port 55490 with the native library preloaded (it must be
# installed for PG_CONFIG). Database bench_native has the extension, the reference page
# (ref.*) and the bare-SQL table; bench_portable has scripts/portable.sh. Each workload runs
# with pgbench for SECONDS; the tables give transactions/s with the ratios, and the backends' CPU
# per transaction.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pg_config=${1:?usage: bench/portable.sh PG_CONFIG [SECONDS] [CLIENTS]}
secs=${2:-8} clients=${3:-2} port=${IDEM_BENCH_PORT:-55490}
bin=$("$pg_config" --bindir)
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
dir=$(mktemp -d /tmp/idem-bench-portable.XXXXXX)
chmod 0777 "$dir"
as_pg "$bin/initdb" -A trust -U postgres --no-sync -E UTF8 --locale=C -D "$dir/data" >/dev/null
cat >>"$dir/data/postgresql.conf" <<CONF
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
shared_preload_libraries = 'idempotency'
idempotency.worker_enabled = off
fsync = off
synchronous_commit = off
CONF
as_pg env -u RUST_BACKTRACE "$bin/pg_ctl" -w -D "$dir/data" -l "$dir/log" start >/dev/null
trap 'as_pg "$bin/pg_ctl" -D "$dir/data" -m fast stop >/dev/null; rm -rf "$dir"' EXIT
psql() { "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -X -q -v ON_ERROR_STOP=1 "$@"; }
psql -d postgres -c 'CREATE DATABASE bench_native' -c 'CREATE DATABASE bench_portable'
psql -d bench_native -c 'CREATE EXTENSION idempotency' -f "$root/bench/reference_plpgsql.sql" \
     -c 'CREATE TABLE public.bare (LIKE idempotency.requests INCLUDING ALL)'
"$root/scripts/portable.sh" | psql -d bench_portable -f -
# IDEM_BENCH_BASELINE: another release's plain script (e.g. the previous commit's), measured
# beside this one in database bench_baseline.
baseline=${IDEM_BENCH_BASELINE:-}
if [ -n "$baseline" ]; then
    psql -d postgres -c 'CREATE DATABASE bench_baseline'
    psql -d bench_baseline -f "$baseline"
fi
# The replayed keys: one succeeded record each, in every flavour's table.
for db in bench_native bench_portable ${baseline:+bench_baseline}; do
    psql -d "$db" -o /dev/null -c "SELECT idem_claim('r', 'k' || i, 'h'), idem_complete('r', 'k' || i, '{\"ok\": true}')
                      FROM generate_series(1, 1000) AS i"
done
psql -d bench_native -o /dev/null -c "SELECT ref.claim_idempotency_key('r', 'k' || i, 'h'), ref.mark_idempotency_succeeded('r', 'k' || i, '{\"ok\": true}')
                         FROM generate_series(1, 1000) AS i" \
     -c "INSERT INTO public.bare SELECT * FROM idempotency.requests"

w="$dir/w" && mkdir -p "$w"
payload=$(tr -d '\n' <"$root/bench/payload.json" | sed "s/'/''/g")
key='\set k random(1, 1000)'
# New keys from 63 bits: a key that came up again would replay, and its complete abort the run.
new='\set n random(1, 9000000000000000000)'
printf '%s\nSELECT * FROM idem_claim(%s, %s, %s);\n' "$key" "'r'" "'k' || :k" "'h'" >"$w/replay_api.sql"
printf '%s\nSELECT * FROM ref.claim_idempotency_key(%s, %s, %s);\n' "$key" "'r'" "'k' || :k" "'h'" >"$w/replay_ref.sql"
printf '%s\nSELECT status, response FROM public.bare WHERE scope = %s AND key = %s;\n' "$key" "'r'" "'k' || :k" >"$w/replay_bare.sql"
printf '%s\nBEGIN;\nSELECT * FROM idem_claim(%s, %s || :client_id || %s || :n, %s);\nSELECT idem_complete(%s, %s || :client_id || %s || :n, %s);\nCOMMIT;\n' \
    "$new" "'n'" "'c'" "'-'" "'h'" "'n'" "'c'" "'-'" "'{\"ok\": true}'" >"$w/new_api.sql"
printf '%s\nBEGIN;\nSELECT * FROM ref.claim_idempotency_key(%s, %s || :client_id || %s || :n, %s);\nSELECT ref.mark_idempotency_succeeded(%s, %s || :client_id || %s || :n, %s);\nCOMMIT;\n' \
    "$new" "'n'" "'c'" "'-'" "'h'" "'n'" "'c'" "'-'" "'{\"ok\": true}'" >"$w/new_ref.sql"
printf '%s\nBEGIN;\nINSERT INTO public.bare (scope, key, request_hash, status, attempt, claimed_at, locked_until, lease, retention, created_at, updated_at, expires_at) VALUES (%s, %s || :client_id || %s || :n, %s, %s, 1, now(), now() + %s, %s, %s, now(), now(), now() + %s) ON CONFLICT DO NOTHING;\nUPDATE public.bare SET status = %s, response = %s, locked_until = NULL WHERE scope = %s AND key = %s || :client_id || %s || :n;\nCOMMIT;\n' \
    "$new" "'n'" "'c'" "'-'" "'h'" "'processing'" "'5 minutes'" "'5 minutes'" "'24 hours'" "'24 hours'" "'succeeded'" "'{\"ok\": true}'" "'n'" "'c'" "'-'" >"$w/new_bare.sql"
printf 'SELECT idem_hash(%s::jsonb);\n' "'$payload'" >"$w/hash_api.sql"
printf 'SELECT pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(%s::jsonb::text, %s)), %s);\n' \
    "'$payload'" "'UTF8'" "'hex'" >"$w/hash_bare.sql"

# One cell: pgbench's transactions/s, and the backends' CPU per transaction (user + system, in
# µs), read from the postmaster's reaped-children times around the run: a figure a busy shared
# machine disturbs far less than wall-clock throughput (autovacuum workers that exit meanwhile
# count too; the medians absorb them).
pm=$(head -1 "$dir/data/postmaster.pid")
hz=$(getconf CLK_TCK)
children() { awk '{print $16 + $17}' "/proc/$pm/stat"; }
cell() { # DB SCRIPT -> "TPS CPU_US"
    local before out t n
    before=$(children)
    out=$("$bin/pgbench" -h 127.0.0.1 -p "$port" -U postgres -n -c "$clients" -j "$clients" -T "$secs" -f "$w/$2" "$1" 2>&1) ||
        echo "bench/portable.sh: pgbench $2 on $1 exited with $?: $(tail -3 <<<"$out")" >&2
    sleep 0.3 # the postmaster reaps the backends
    t=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' <<<"$out" | cut -d. -f1)
    n=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
    [ -n "$n" ] && [ "$n" -gt 0 ] || { echo "- -"; return; }
    echo "$t $(( ($(children) - before) * 1000000 / hz / n ))"
}
# Rounds: every cell once per round, in turn, so that a slow spell of a shared machine hits all
# of them alike; the table gives each cell's median, and portable / PL/pgSQL is the median of the
# rounds' own ratios (each from cells measured a few seconds apart).
rounds=${IDEM_BENCH_ROUNDS:-3}
flavours="native portable ${baseline:+baseline} ref bare"
declare -A runs cpu
for ((round = 1; round <= rounds; round++)); do
    for workload in replay new hash; do
        for f in $flavours; do
            case $f in native | ref | bare) db=bench_native ;; *) db=bench_$f ;; esac
            case $f in ref | bare) script=${workload}_$f.sql ;; *) script=${workload}_api.sql ;; esac
            [ -f "$w/$script" ] || continue
            [ "$f.$workload" != baseline.hash ] || continue
            read -r t c < <(cell "$db" "$script")
            runs[$workload.$f]+=" $t" cpu[$workload.$f]+=" $c"
        done
        if [ -f "$w/${workload}_ref.sql" ]; then
            p=${runs[$workload.portable]##* } r=${runs[$workload.ref]##* }
            runs[$workload.ratio]+=" $(awk -v p="$p" -v r="$r" 'BEGIN { printf "%.3f", p / r }')"
            [ -z "$baseline" ] || runs[$workload.bratio]+=" $(awk -v p="${runs[$workload.baseline]##* }" -v r="$r" 'BEGIN { printf "%.3f", p / r }')"
        fi
    done
done
median() { [ -n "${1// /}" ] || { echo -; return; }; printf '%s\n' $1 | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
row() { # WORKLOAD ARRAY-NAME -> the medians of each flavour
    local -n a=$2
    printf '%-8s' "$1"
    for f in $flavours; do printf ' %10s' "$(median "${a[$1.$f]:-}")"; done
}
header() { printf '%-8s' "$1"; for f in $flavours; do printf ' %10s' "${f/ref/PL/pgSQL}"; done; }
echo "transactions/s (median)                                 ratios: native/portable, portable/PL/pgSQL (median of rounds)"
echo "$(header workload)"
for workload in replay new hash; do
    n=$(median "${runs[$workload.native]:-}") p=$(median "${runs[$workload.portable]:-}")
    printf '%s   %6.2f  %6s' "$(row $workload runs)" "$(awk -v n="$n" -v p="$p" 'BEGIN { print n / p }')" "$(median "${runs[$workload.ratio]:-}")"
    [ -z "$baseline" ] || printf '  (baseline: %s)' "$(median "${runs[$workload.bratio]:-}")"
    echo
done
echo "backend CPU per transaction, µs (median)"
for workload in replay new hash; do echo "$(row $workload cpu)"; done
echo "($rounds rounds of $secs s per cell, $clients clients, $("$bin/postgres" --version)${baseline:+; baseline: $baseline})"
