#!/usr/bin/env bash
# Instructions per operation, portable edition vs the PL/pgSQL page (bench/reference_plpgsql.sql),
# counted by valgrind's callgrind in a single-user backend: a figure that a busy shared machine
# does not move (wall-clock and CPU time do, by +-30 %: bench/portable.sh).
#
#   bench/portable_instructions.sh PG_CONFIG [N=1000]      (needs valgrind: apt-get install valgrind)
#
# Each operation runs N times in a procedure that commits after each one, as a client's
# transactions would; the figure is (run of 200+N) - (run of 200), divided by N, so start-up and
# the first calls' catalog loads cancel out. What it leaves out: the client's statement (parse,
# plan, protocol) and WAL flushing, which are the same for both.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pg_config=${1:?usage: bench/portable_instructions.sh PG_CONFIG [N]}
n=${2:-1000}
bin=$("$pg_config" --bindir)
command -v valgrind >/dev/null || { echo "valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
dir=$(mktemp -d /tmp/idem-bench-instr.XXXXXX)
chmod 0777 "$dir"
trap 'rm -rf "$dir"' EXIT
as_pg "$bin/initdb" -A trust -U postgres --no-sync -E UTF8 --locale=C -D "$dir/data" >/dev/null
printf "fsync = off\nsynchronous_commit = off\nlisten_addresses = ''\nunix_socket_directories = '%s'\n" "$dir" >>"$dir/data/postgresql.conf"
as_pg env -u RUST_BACKTRACE "$bin/pg_ctl" -w -D "$dir/data" -l "$dir/log" start >/dev/null
psql() { "$bin/psql" -h "$dir" -U postgres -X -q -v ON_ERROR_STOP=1 "$@"; }
psql -d postgres -c 'CREATE DATABASE b'
"$root/scripts/portable.sh" | psql -d b -f -
psql -d b -f "$root/bench/reference_plpgsql.sql" 2>/dev/null
payload=$(tr -d '\n' <"$root/bench/payload.json" | sed "s/'/''/g")
# One procedure per cell; "tag" makes each run's new keys its own.
psql -d b -o /dev/null <<SQL
SELECT public.idem_claim('r', 'k' || i, 'h'), public.idem_complete('r', 'k' || i, '{"ok": true}') FROM generate_series(1, 1000) AS i;
SELECT ref.claim_idempotency_key('r', 'k' || i, 'h'), ref.mark_idempotency_succeeded('r', 'k' || i, '{"ok": true}') FROM generate_series(1, 1000) AS i;
CREATE PROCEDURE public.portable_replay(n int, tag text) LANGUAGE plpgsql AS \$\$ BEGIN
  FOR i IN 1..n LOOP PERFORM public.idem_claim('r', 'k' || (i % 1000 + 1), 'h'); COMMIT; END LOOP; END \$\$;
CREATE PROCEDURE public.page_replay(n int, tag text) LANGUAGE plpgsql AS \$\$ BEGIN
  FOR i IN 1..n LOOP PERFORM ref.claim_idempotency_key('r', 'k' || (i % 1000 + 1), 'h'); COMMIT; END LOOP; END \$\$;
CREATE PROCEDURE public.portable_new(n int, tag text) LANGUAGE plpgsql AS \$\$ BEGIN
  FOR i IN 1..n LOOP PERFORM public.idem_claim('n', tag || i, 'h'); COMMIT; END LOOP; END \$\$;
CREATE PROCEDURE public.page_new(n int, tag text) LANGUAGE plpgsql AS \$\$ BEGIN
  FOR i IN 1..n LOOP PERFORM ref.claim_idempotency_key('n', tag || i, 'h'); COMMIT; END LOOP; END \$\$;
CREATE PROCEDURE public.portable_new_complete(n int, tag text) LANGUAGE plpgsql AS \$\$ BEGIN
  FOR i IN 1..n LOOP PERFORM public.idem_claim('n', tag || i, 'h');
    PERFORM public.idem_complete('n', tag || i, '{"ok": true}'); COMMIT; END LOOP; END \$\$;
CREATE PROCEDURE public.page_new_complete(n int, tag text) LANGUAGE plpgsql AS \$\$ BEGIN
  FOR i IN 1..n LOOP PERFORM ref.claim_idempotency_key('n', tag || i, 'h');
    PERFORM ref.mark_idempotency_succeeded('n', tag || i, '{"ok": true}'); COMMIT; END LOOP; END \$\$;
-- The payload goes through a variable: a constant argument would be folded once into the plan.
CREATE PROCEDURE public.portable_hash(n int, tag text) LANGUAGE plpgsql AS \$\$ DECLARE p jsonb := '$payload'; BEGIN
  FOR i IN 1..n LOOP PERFORM public.idem_hash(p); COMMIT; END LOOP; END \$\$;
CREATE PROCEDURE public.bare_hash(n int, tag text) LANGUAGE plpgsql AS \$\$ DECLARE p jsonb := '$payload'; BEGIN
  FOR i IN 1..n LOOP PERFORM pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(p::text, 'UTF8')), 'hex'); COMMIT; END LOOP; END \$\$;
SQL
as_pg "$bin/pg_ctl" -D "$dir/data" -m fast stop >/dev/null
count() { # PROC ITERATIONS -> instructions of a single-user backend that runs CALL PROC
    local out="$dir/cg.$1.$2"
    echo "CALL public.$1($2, 't$2$RANDOM');" |
        as_pg valgrind --tool=callgrind --callgrind-out-file="$out" "$bin/postgres" --single -D "$dir/data" b >/dev/null 2>&1
    sed -n 's/^summary: \([0-9]*\)/\1/p' "$out"
}
per_op() { echo $(( ($(count "$1" $((200 + n))) - $(count "$1" 200)) / n )); }
printf '%-22s %12s %12s %8s\n' workload portable page page/portable
for w in replay new new_complete; do
    p=$(per_op portable_$w) r=$(per_op page_$w)
    printf '%-22s %12s %12s %8s\n' "$w" "$p" "$r" "$(awk -v p="$p" -v r="$r" 'BEGIN { printf "%.3f", r / p }')"
done
p=$(per_op portable_hash) r=$(per_op bare_hash)
printf '%-22s %12s %12s %8s\n' "hash (bare: sha256)" "$p" "$r" "$(awk -v p="$p" -v r="$r" 'BEGIN { printf "%.3f", r / p }')"
echo "(instructions per operation, callgrind, $n operations each, $("$bin/postgres" --version))"
