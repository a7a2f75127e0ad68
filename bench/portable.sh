#!/usr/bin/env bash
# Portable vs native vs the PL/pgSQL page (bench/reference_plpgsql.sql) vs bare SQL, side by
# side in one run on one server (issue 21): replay, new claim + complete, and idem_hash.
#
#   bench/portable.sh PG_CONFIG [SECONDS] [CLIENTS]      (defaults: 8 s, 2 clients; IDEM_BENCH_ROUNDS=3)
#
# The server is a throw-away one on port 55490 with the native library preloaded (it must be
# installed for PG_CONFIG). Database bench_native has the extension, the reference page
# (ref.*) and the bare-SQL table; bench_portable has scripts/portable.sh. Each workload runs
# with pgbench for SECONDS; the table gives transactions/s and each one's ratio to portable.
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
# The replayed keys: one succeeded record each, in every flavour's table.
for db in bench_native bench_portable; do
    psql -d "$db" -o /dev/null -c "SELECT idem_claim('r', 'k' || i, 'h'), idem_complete('r', 'k' || i, '{\"ok\": true}')
                      FROM generate_series(1, 1000) AS i"
done
psql -d bench_native -o /dev/null -c "SELECT ref.claim_idempotency_key('r', 'k' || i, 'h'), ref.mark_idempotency_succeeded('r', 'k' || i, '{\"ok\": true}')
                         FROM generate_series(1, 1000) AS i" \
     -c "INSERT INTO public.bare SELECT * FROM idempotency.requests"

w="$dir/w" && mkdir -p "$w"
payload=$(tr -d '\n' <"$root/bench/payload.json" | sed "s/'/''/g")
key='\set k random(1, 1000)'
new='\set n random(1, 1000000000)'
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

tps() { # DB SCRIPT -> transactions/s
    "$bin/pgbench" -h 127.0.0.1 -p "$port" -U postgres -n -c "$clients" -j "$clients" -T "$secs" -f "$w/$2" "$1" 2>/dev/null |
        sed -n 's/^tps = \([0-9.]*\) .*/\1/p' | cut -d. -f1
}
# Rounds: every cell once per round, in turn, so that a slow spell of a shared machine hits all
# of them alike; the table gives each cell's median.
rounds=${IDEM_BENCH_ROUNDS:-3}
declare -A runs
for ((round = 1; round <= rounds; round++)); do
    for workload in replay new hash; do
        runs[$workload.native]+=" $(tps bench_native "${workload}_api.sql")"
        runs[$workload.portable]+=" $(tps bench_portable "${workload}_api.sql")"
        [ -f "$w/${workload}_ref.sql" ] && runs[$workload.ref]+=" $(tps bench_native "${workload}_ref.sql")"
        [ -f "$w/${workload}_bare.sql" ] && runs[$workload.bare]+=" $(tps bench_native "${workload}_bare.sql")"
    done
done
median() { [ -n "${1// /}" ] || { echo -; return; }; printf '%s\n' $1 | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
printf '%-10s %10s %10s %10s %10s   %s\n' workload native portable "PL/pgSQL" "bare SQL" "native/portable  portable/PL/pgSQL"
for workload in replay new hash; do
    n=$(median "${runs[$workload.native]:-}") p=$(median "${runs[$workload.portable]:-}")
    r=$(median "${runs[$workload.ref]:-}") b=$(median "${runs[$workload.bare]:-}")
    ratio=$(awk -v n="$n" -v p="$p" -v r="$r" 'BEGIN { s = sprintf("%15.2f", n / p); if (r != "-") s = s sprintf("  %17.2f", p / r); print s }')
    printf '%-10s %10s %10s %10s %10s   %s\n' "$workload" "$n" "$p" "$r" "$b" "$ratio"
done
echo "(transactions/s, median of $rounds rounds of $secs s per cell, $clients clients, $("$bin/postgres" --version))"
