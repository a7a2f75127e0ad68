#!/usr/bin/env bash
# The cost of retention, flat layout (idem_purge's batched DELETE) against the generations
# layout (idem_rotate's TRUNCATE; docs/retention.md), side by side in one run on one release
# build and one cluster (bench/lib/release_cluster.sh), in four parts (PARTS, default all):
#   1. claims' throughput while ROWS expired records go, as a share of the same layout's
#      throughput with nothing expiring: pgbench (CLIENTS clients, DURATION s, a new key claimed
#      and completed per transaction); 2 s in, the retention step starts: idem_purge(BATCH) in
#      a loop until it returns 0, or idem_rotate(force => true) until 'switched'. The share is
#      the mean of pgbench's per-second progress over the purge's seconds (at least 5);
#   2. WAL bytes per expired record, from pg_current_wal_lsn() around the step with no other
#      load (and around the VACUUM the DELETE needs);
#   3. replays and new keys at BIG records against a table of 1,000, in both layouts
#      (SECONDS_BIG s each);
#   4. dead tuples and table plus index size after REQUESTS requests, in a fresh database per
#      layout (flat4, gen4). Each request is a new key claimed and completed with retention
#      RETENTION4, by CLIENTS pgbench clients (REQUESTS / CLIENTS transactions each), while the
#      retention work runs as in production, from one session looping beside the load: flat,
#      idem_purge(BATCH), again at once after a full batch, else after NAP s; generations
#      (generation_window WINDOW4), idem_rotate(batch => BATCH), not forced, again at once
#      after moving a full batch, else after NAP s. Autovacuum keeps the server's defaults.
#      When the load ends the loop stops, and the table (for generations: the table and its
#      three generations, summed) is read twice: as the load left it (pg_stat_user_tables'
#      n_live_tup, n_dead_tup, autovacuum_count and vacuum_count, and pg_total_relation_size,
#      read before anything scans the table; then an exact count of its rows), and again after
#      a manual VACUUM of each of those tables.
# Usage: bench/retention.sh [MAJOR]   env: PARTS ("1 2 3 4") ROWS (1000000) CLIENTS (4)
#        DURATION (30) BATCH (10000) BIG (10000000) SECONDS_BIG (10) SYNC_COMMIT (on)
#        REQUESTS (1000000) RETENTION4 (30 seconds) WINDOW4 (15 seconds) NAP (1)
set -euo pipefail
cd "$(dirname "$0")/.."
major=${1:-17}
rows=${ROWS:-1000000}
clients=${CLIENTS:-4}
seconds=${DURATION:-30}
batch=${BATCH:-10000}
big=${BIG:-10000000}
seconds_big=${SECONDS_BIG:-10}
sync_commit=${SYNC_COMMIT:-on}
port=${IDEM_BENCH_PORT:-54341}
work=${IDEM_BENCH_DIR:-/var/tmp/idempotency-bench-retention}
parts=" ${PARTS:-1 2 3 4} "
requests=${REQUESTS:-1000000}
retention4=${RETENTION4:-30 seconds}
window4=${WINDOW4:-15 seconds}
nap=${NAP:-1}
part() { [[ $parts == *" $1 "* ]]; }
extra_conf="max_locks_per_transaction = 256"

# shellcheck source=bench/lib/release_cluster.sh
source bench/lib/release_cluster.sh

q() { "$bindir/psql" -X -q -At -h 127.0.0.1 -p "$port" -U postgres -v ON_ERROR_STOP=1 -d "$@"; }
if part 1 || part 2 || part 3; then
  q postgres -c "CREATE DATABASE flat" -c "CREATE DATABASE gen"
  for db in flat gen; do q "$db" -c "CREATE EXTENSION idempotency"; done
  q gen -c "SELECT idem_set_layout('generations')" >/dev/null
fi

# `n` finished records of `scope` in `table`, expired (`expired` true) or kept for a year.
records() {
  local db=$1 table=$2 scope=$3 n=$4 expired=$5
  q "$db" <<SQL
INSERT INTO $table (scope, key, request_hash, status, attempt, response, claimed_at, lease,
    retention, created_at, updated_at, expires_at)
SELECT '$scope', 'k' || g, 'h', 'succeeded', 1, '{"ok": true}', now() - interval '2 days',
       '5 minutes', '1 day', now() - interval '2 days', now() - interval '2 days',
       CASE WHEN $expired THEN now() - interval '1 day' - g * interval '1 millisecond'
            ELSE now() + interval '1 year' END
FROM generate_series(1, $n) AS g;
VACUUM ANALYZE $table;
SQL
}
# The oldest generation of database gen (the next to be emptied).
oldest() { q gen -c "SELECT idempotency.layout_table((current_generation % 3 + 1)::int2, false) FROM idempotency.layout"; }
lsn() { q "$1" -c "SELECT pg_current_wal_lsn()"; }
wal_since() { q "$1" -c "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '$2')::bigint"; }

cat > "$work/claims.sql" <<'SQL'
\set k random(1, 4611686018427387903)
SELECT idem_complete(c.scope, c.key, '{"ok": true}')
FROM (SELECT 'bench'::text AS scope, :client_id || '-' || :k AS key) AS c,
     idem_claim(c.scope, c.key, 'h') AS claim
WHERE claim.outcome = 'new_claim';
SQL
pgbench() { "$bindir/pgbench" -n -h 127.0.0.1 -p "$port" -U postgres -c "$clients" -j "$clients" "$@"; }
tps_of() { sed -n 's/^tps = \([0-9]*\).*/\1/p' "$1" | head -1; }
# Mean tps of pgbench's per-second progress lines stamped in (from, to].
mean_tps() {
  awk -v s="$2" -v e="$3" '
    /^progress: / { t = $2 + 0; if (t > s && t <= e) { sum += $4; n++ } }
    END { if (n) printf "%.1f", sum / n; else print "" }' "$1"
}
plus() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a + b }'; }

# The retention step of each layout; prints its seconds.
purge_all() { until [ "$(q flat -c "SELECT idem_purge($batch)")" = 0 ]; do :; done; }
rotate_all() {
  local step
  for _ in $(seq 1 10000); do
    step=$(q gen -c "SELECT idem_rotate(force => true, lock_wait => '100 ms', batch => $batch)")
    [ "$step" = switched ] && return 0
  done
  log "no switch: last step $step"; return 1
}

declare -A base share during step_secs base1 base2
# The baseline of each layout, run before and after its retention run (ABA: the machine's drift
# between them shows); the share is against their mean.
baseline() {
  log "$1: claims with nothing expiring, ${seconds}s ($2)"
  pgbench -T "$seconds" -f "$work/claims.sql" "$1" > "$work/$1.base$2.out"
  tps_of "$work/$1.base$2.out"
}
if part 1; then
for db in flat gen; do base1[$db]=$(baseline "$db" 1); done

log "loading $rows expired records into each layout"
records flat idempotency.requests old "$rows" true
records gen "$(oldest)" old "$rows" true
q flat -c CHECKPOINT
for db in flat gen; do
  log "$db: the same claims while $rows records expire"
  pgbench -T "$seconds" -P 1 --progress-timestamp -f "$work/claims.sql" "$db" \
    > "$work/$db.load.out" 2> "$work/$db.load.progress" &
  bench_pid=$!
  sleep 2
  start=$(date +%s.%N)
  if [ "$db" = flat ]; then purge_all; else rotate_all; fi
  end=$(date +%s.%N)
  wait "$bench_pid"
  step_secs[$db]=$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.2f", e - s }')
  window_end=$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.3f", (e - s < 5) ? s + 5 : e }')
  during[$db]=$(mean_tps "$work/$db.load.progress" "$start" "$window_end")
  base2[$db]=$(baseline "$db" 2)
  base[$db]=$(awk -v a="${base1[$db]}" -v b="${base2[$db]}" 'BEGIN { printf "%.0f", (a + b) / 2 }')
  share[$db]=$(awk -v a="${during[$db]}" -v b="${base[$db]}" 'BEGIN { printf "%.1f", 100 * a / b }')
  left=$(q "$db" -c "SELECT count(*) FROM idempotency.requests WHERE scope = 'old'")
  [ "$left" = 0 ] || log "$db: $left expired records left"
done
fi

if part 2; then
log "WAL per expired record, nothing else running"
records flat idempotency.requests wal "$rows" true
q flat -c CHECKPOINT
at=$(lsn flat); purge_all; purge_wal=$(wal_since flat "$at")
at=$(lsn flat); q flat -c "VACUUM idempotency.requests"; vacuum_wal=$(wal_since flat "$at")
records gen "$(oldest)" wal "$rows" true
q gen -c CHECKPOINT
at=$(lsn gen); rotate_all; rotate_wal=$(wal_since gen "$at")
fi

cat > "$work/replay.sql" <<'SQL'
SELECT outcome FROM idem_claim('big', 'k' || :k, 'h');
SQL
declare -A replay fresh
big_run() { # db label keys
  { echo "\\set k random(1, $3)"; cat "$work/replay.sql"; } > "$work/replay.$2.sql"
  pgbench -T "$seconds_big" -f "$work/replay.$2.sql" "$1" > "$work/$2.replay.out"
  replay[$2]=$(tps_of "$work/$2.replay.out")
  pgbench -T "$seconds_big" -f "$work/claims.sql" "$1" > "$work/$2.new.out"
  fresh[$2]=$(tps_of "$work/$2.new.out")
}
if part 3; then
for db in flat gen; do
  q "$db" -c "DELETE FROM idempotency.requests" -c "VACUUM idempotency.requests"
  if [ "$db" = flat ]; then small=idempotency.requests; else small=idempotency.requests_g1; fi
  records "$db" "$small" big 1000 false
  log "$db: replays and new keys at 1,000 records"
  big_run "$db" "$db.small" 1000
  log "$db: loading $big records (a third in each generation)"
  q "$db" -c "DELETE FROM idempotency.requests WHERE scope = 'big'"
  if [ "$db" = flat ]; then
    records flat idempotency.requests big "$big" false
  else
    third=$((big / 3))
    q gen <<SQL
INSERT INTO idempotency.requests_g1 (scope, key, request_hash, status, attempt, response, claimed_at,
    lease, retention, created_at, updated_at, expires_at)
SELECT 'big', 'k' || g, 'h', 'succeeded', 1, '{"ok": true}', now(), '5 minutes', '1 day', now(), now(),
       now() + interval '1 year' FROM generate_series(1, $third) AS g;
INSERT INTO idempotency.requests_g2 (scope, key, request_hash, status, attempt, response, claimed_at,
    lease, retention, created_at, updated_at, expires_at)
SELECT 'big', 'k' || g, 'h', 'succeeded', 1, '{"ok": true}', now(), '5 minutes', '1 day', now(), now(),
       now() + interval '1 year' FROM generate_series($third + 1, 2 * $third) AS g;
INSERT INTO idempotency.requests_g3 (scope, key, request_hash, status, attempt, response, claimed_at,
    lease, retention, created_at, updated_at, expires_at)
SELECT 'big', 'k' || g, 'h', 'succeeded', 1, '{"ok": true}', now(), '5 minutes', '1 day', now(), now(),
       now() + interval '1 year' FROM generate_series(2 * $third + 1, $big) AS g;
VACUUM ANALYZE idempotency.requests_g1, idempotency.requests_g2, idempotency.requests_g3;
SQL
  fi
  q "$db" -c CHECKPOINT
  log "$db: replays and new keys at $big records"
  big_run "$db" "$db.big" "$big"
done
fi

per() { awk -v b="$1" -v r="$rows" 'BEGIN { printf "%.2f", b / r }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

if part 4; then
# The retention work of each layout, as production runs it, until $2 exists; one line a step in $3.
upkeep() {
  local db=$1 stop=$2 out=$3 answer
  while [ ! -e "$stop" ]; do
    if [ "$db" = flat4 ]; then
      if ! answer=$(q "$db" -c "SELECT idem_purge($batch)" 2>>"$out.err"); then answer=error; fi
      echo "$answer" >> "$out"
      if [ "$answer" != "$batch" ]; then sleep "$nap"; fi
    else
      if ! answer=$(q "$db" -c "SELECT idem_rotate(batch => $batch)" 2>>"$out.err"); then answer=error; fi
      echo "$answer" >> "$out"
      if [ "$answer" != "moved $batch" ]; then sleep "$nap"; fi
    fi
  done
}
# The table, or the table and its generations, as a regclass[] literal.
rels_of() {
  if [ "$1" = flat4 ]; then echo "'{idempotency.requests}'"
  else echo "'{idempotency.requests,idempotency.requests_g1,idempotency.requests_g2,idempotency.requests_g3}'"; fi
}
# One row of the state table: the statistics and size first, then the exact counts (a scan).
state() { # db label
  local rels
  rels=$(rels_of "$1")
  q "$1" -F ' ' -c "SELECT sum(n_live_tup), sum(n_dead_tup),
      sum(autovacuum_count), sum(vacuum_count), sum(pg_total_relation_size(relid))
    FROM pg_stat_user_tables WHERE relid = ANY ($rels::regclass[])" > "$work/$1.$2.stats"
  q "$1" -F ' ' -c "SELECT count(*), count(*) FILTER (WHERE expires_at < now()) FROM idempotency.requests" \
    > "$work/$1.$2.rows"
  # Per table, for the appendix.
  q "$1" -c "SELECT format('| %s | %s | %s | %s | %s | %s | %s | %s |', '$1 ($2)', relname, n_live_tup,
      n_dead_tup, autovacuum_count, vacuum_count, coalesce(last_autovacuum::time(0)::text, ''),
      round(pg_total_relation_size(relid) / 1048576.0, 1))
    FROM pg_stat_user_tables WHERE relid = ANY ($rels::regclass[]) ORDER BY relname" >> "$work/part4.tables"
}
declare -A run_secs run_tps run_wal run_steps vac_secs
: > "$work/part4.tables"
cat > "$work/claims4.sql" <<SQL
\\set k random(1, 4611686018427387903)
SELECT idem_complete(c.scope, c.key, '{"ok": true}')
FROM (SELECT 'bench'::text AS scope, :client_id || '-' || :k AS key) AS c,
     idem_claim(c.scope, c.key, 'h', retention => '$retention4') AS claim
WHERE claim.outcome = 'new_claim';
SQL
per_client=$(( (requests + clients - 1) / clients ))
for db in flat4 gen4; do
  q postgres -c "CREATE DATABASE $db"
  q "$db" -c "CREATE EXTENSION idempotency"
  if [ "$db" = gen4 ]; then
    q "$db" -c "SELECT idem_set_layout('generations')" \
      -c "UPDATE idempotency.layout SET generation_window = '$window4'" >/dev/null
  fi
  q "$db" -c CHECKPOINT
  log "$db: $((per_client * clients)) requests, retention $retention4, the retention work beside them"
  rm -f "$work/$db.stop"; : > "$work/$db.upkeep"
  upkeep "$db" "$work/$db.stop" "$work/$db.upkeep" &
  upkeep_pid=$!
  at=$(lsn "$db")
  start=$(date +%s.%N)
  pgbench -t "$per_client" -P 10 -f "$work/claims4.sql" "$db" > "$work/$db.run.out" 2> "$work/$db.run.progress"
  end=$(date +%s.%N)
  touch "$work/$db.stop"; wait "$upkeep_pid"
  run_wal[$db]=$(wal_since "$db" "$at")
  run_secs[$db]=$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.0f", e - s }')
  run_tps[$db]=$(tps_of "$work/$db.run.out")
  done_tx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$work/$db.run.out")
  [ "$done_tx" = $((per_client * clients)) ] || log "$db: pgbench processed $done_tx transactions"
  if [ "$db" = flat4 ]; then
    run_steps[$db]=$(awk -v b="$batch" '$1 == "error" { e++; next } { n++; sum += $1 }
      END { printf "%d idem_purge calls, %d records purged", n, sum; if (e) printf ", %d errors", e }' "$work/$db.upkeep")
  else
    run_steps[$db]=$(awk '$1 == "moved" { m += $2; mc++ } $1 == "switched" { s++ } $1 == "busy" { b++ }
      $1 == "idle" { i++ } $1 == "emptied" { em++ } $1 == "error" { e++ }
      END { printf "%d switched, %d moved (%d records), %d busy, %d idle", s, mc, m, b, i
            if (em) printf ", %d emptied", em; if (e) printf ", %d errors", e }' "$work/$db.upkeep")
  fi
  [ ! -s "$work/$db.upkeep.err" ] || log "$db: the retention work failed: $(sort -u "$work/$db.upkeep.err" | head -3)"
  sleep 1
  state "$db" load
  rels=$(rels_of "$db")
  vac_start=$(date +%s.%N)
  if [ "$db" = flat4 ]; then q "$db" -c "VACUUM idempotency.requests"
  else q "$db" -c "VACUUM idempotency.requests, idempotency.requests_g1, idempotency.requests_g2, idempotency.requests_g3"; fi
  vac_secs[$db]=$(awk -v s="$vac_start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.2f", e - s }')
  sleep 1
  state "$db" vacuum
done
fi

per() { awk -v b="$1" -v r="$rows" 'BEGIN { printf "%.2f", b / r }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
mb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
echo "# bench/retention.sh: PostgreSQL $major, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), synchronous_commit = $sync_commit, parts $(xargs <<< "$parts")"
if part 1; then cat <<OUT
| layout | claims/s, nothing expiring (before, after) | claims/s while $rows records expire | share | the retention step |
|---|---:|---:|---:|---:|
| flat (idem_purge, batch $batch) | ${base[flat]} (${base1[flat]}, ${base2[flat]}) | ${during[flat]} | ${share[flat]} % | ${step_secs[flat]} s |
| generations (idem_rotate) | ${base[gen]} (${base1[gen]}, ${base2[gen]}) | ${during[gen]} | ${share[gen]} % | ${step_secs[gen]} s |

OUT
fi
if part 2; then cat <<OUT
| WAL per expired record | bytes |
|---|---:|
| idem_purge (DELETE) | $(per "$purge_wal") |
| the VACUUM after it | $(per "$vacuum_wal") |
| idem_rotate (TRUNCATE) | $(per "$rotate_wal") |

OUT
fi
if part 3; then cat <<OUT
| layout | replays/s at 1,000 | at $big | ratio | new keys/s at 1,000 | at $big | ratio |
|---|---:|---:|---:|---:|---:|---:|
| flat | ${replay[flat.small]} | ${replay[flat.big]} | $(ratio "${replay[flat.big]}" "${replay[flat.small]}") | ${fresh[flat.small]} | ${fresh[flat.big]} | $(ratio "${fresh[flat.big]}" "${fresh[flat.small]}") |
| generations | ${replay[gen.small]} | ${replay[gen.big]} | $(ratio "${replay[gen.big]}" "${replay[gen.small]}") | ${fresh[gen.small]} | ${fresh[gen.big]} | $(ratio "${fresh[gen.big]}" "${fresh[gen.small]}") |

OUT
fi
if part 4; then
  av=$(q postgres -F ' ' -c "SELECT current_setting('autovacuum'), current_setting('autovacuum_naptime'),
    current_setting('autovacuum_vacuum_scale_factor'), current_setting('autovacuum_vacuum_threshold')")
  read -r av_on av_nap av_scale av_thr <<< "$av"
  cat <<OUT
$((per_client * clients)) requests per layout (a new key claimed and completed each, retention $retention4, $clients clients); autovacuum = $av_on (naptime $av_nap, scale factor $av_scale, threshold $av_thr)
| layout | seconds | claims/s | WAL | the retention work during the run |
|---|---:|---:|---:|---|
| flat (idem_purge, batch $batch, every ${nap} s unless a full batch) | ${run_secs[flat4]} | ${run_tps[flat4]} | $(mb "${run_wal[flat4]}") MB | ${run_steps[flat4]} |
| generations (idem_rotate, window $window4, every ${nap} s unless a full batch moved) | ${run_secs[gen4]} | ${run_tps[gen4]} | $(mb "${run_wal[gen4]}") MB | ${run_steps[gen4]} |

| layout | when | rows (expired) | n_live_tup | n_dead_tup | autovacuum_count | vacuum_count | table + indexes |
|---|---|---:|---:|---:|---:|---:|---:|
OUT
  for db in flat4 gen4; do
    for when in load vacuum; do
      read -r live dead avc vc size < "$work/$db.$when.stats"
      read -r nrows nexp < "$work/$db.$when.rows"
      if [ "$db" = flat4 ]; then name=flat; else name=generations; fi
      if [ "$when" = load ]; then label="after the load"; else label="after VACUUM (${vac_secs[$db]} s)"; fi
      echo "| $name | $label | $nrows ($nexp) | $live | $dead | $avc | $vc | $(mb "$size") MB |"
    done
  done
  echo
  echo "| database (when) | table | n_live_tup | n_dead_tup | autovacuum_count | vacuum_count | last autovacuum | MB |"
  echo "|---|---|---:|---:|---:|---:|---|---:|"
  cat "$work/part4.tables"
fi
