#!/usr/bin/env bash
# bench/transactional.sh - what a transactional handler costs: the drain of
# no-op jobs through the batched path (`noop`: completions recorded in
# batches, off the lanes, nothing written to the jobs' rows) beside the
# same drain through transactional handlers (`noop_tx`: each job completes
# in a transaction of its own on the transactional pool, its row written;
# `record_tx` {"ms": 0}: the same, its handler inserting one row into
# `job_executions` in that transaction), at the concurrencies users run,
# and pgbench's commits/s for the same one-row INSERT from 8 clients, on
# one throwaway PostgreSQL (initdb defaults, synchronous_commit = on), in
# one run.
#
#   bench/transactional.sh                    # about 6 minutes
#   TX_GROUP=1,32 bench/transactional.sh      # at each transactional_group
#
# Knobs: N (200000 batched jobs), N_TX (30000 transactional jobs: their
# drain is slower, and the same few seconds of it measure as well),
# CONCURRENCY (10,64), TX_KINDS (noop_tx,record_tx), TX_POOL (the
# transactional pool per process: database.transactional_pool_size;
# default the shipped 8, and the concurrency itself), TX_GROUP (a list of
# group sizes G, each run as `transactional_group = G` in [queues.default];
# empty, the default: the key is not passed), PGBENCH_SECONDS (10),
# PGBENCH_GROUP (32: the INSERTs a transaction of pgbench's group ceiling
# runs, each in a savepoint, unpipelined and pipelined; 0 skips it),
# PORT (5496), PGDIR, BIN (an actor-worker binary; default: Release build
# in build-bench), OUT (a file to copy the log and the table to).
#
# Output: pgbench's and bench/run.sh's lines, then one table: jobs/s of each
# path, kind, group and concurrency; its ratio to the batched no-op drain
# at the same concurrency and to pgbench's commits/s; WAL bytes per job and
# in INSERTs of one job_executions row (the WAL one such INSERT costs,
# measured as below); commits per job.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
SCRIPT=transactional.sh
N=${N:-200000}
N_TX=${N_TX:-30000}
CONCURRENCY=${CONCURRENCY:-10,64}
TX_KINDS=${TX_KINDS:-noop_tx,record_tx}
TX_GROUP=${TX_GROUP:-}
PGBENCH_SECONDS=${PGBENCH_SECONDS:-10}
PGBENCH_GROUP=${PGBENCH_GROUP:-32}
PORT=${PORT:-5496}
PGDIR=${PGDIR:-/tmp/aw-tx-bench-pg-$$}
# shellcheck source=bench/lib.sh
source "$HERE/lib.sh"
LOG=$(mktemp /tmp/aw-tx-bench.XXXXXX.log)
WORK=$(mktemp -d /tmp/aw-tx-bench.XXXXXX)
BENCH_CLEANUP+=("rm -rf \"$WORK\" \"$LOG\"")

"$ROOT/scripts/install-deps.sh"
bench_build
PGBENCH=$(pg_config --bindir 2>/dev/null || true)/pgbench
[ -x "$PGBENCH" ] || PGBENCH=$(command -v pgbench) || die "pgbench not found (Debian: postgresql-15)"
bench_start_pg >/dev/null
export BENCH_EXTERNAL_PG=1 PORT BIN PROCS=1 REPS=1

# The row record_tx inserts (app/builtin_kinds.hpp), in a scratch database.
EXEC_DDL="create table job_executions (
  id bigserial primary key, job_id bigint not null, attempt integer not null,
  worker text not null, started_at timestamptz not null default clock_timestamp(),
  finished_at timestamptz)"
# A worker id as make_worker_id writes them (node:pid:8 hex digits).
WORKER_ID="bench1:123456:0123abcd"

{
  echo "# transactional.sh: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores; $BIN"
  echo "# N=$N N_TX=$N_TX CONCURRENCY=$CONCURRENCY TX_KINDS=$TX_KINDS TX_POOL=${TX_POOL:-8,<concurrency>} TX_GROUP=${TX_GROUP:-none}"

  # The WAL of one INSERT of such a row: 10,000 single-row INSERT statements
  # in one transaction (a PL/pgSQL loop), the WAL insert position's diff
  # around it ÷ 10,000 (heap tuple, primary key entry, the sequence's share,
  # new pages; one commit record spread over 10,000 rows).
  sql postgres -c "create database aw_tx_scratch"
  sql aw_tx_scratch -c "$EXEC_DDL"
  row=$(sql aw_tx_scratch -F'|' <<EOF
select pg_current_wal_insert_lsn() as l0 \\gset
do \$\$ begin for i in 1..10000 loop
  insert into job_executions (job_id, attempt, worker, finished_at)
  values (i, 1, '$WORKER_ID', clock_timestamp());
end loop; end \$\$;
select round(pg_wal_lsn_diff(pg_current_wal_insert_lsn(), :'l0') / 10000.0),
       (select round(avg(pg_column_size(e.*))) from job_executions e);
EOF
)
  IFS='|' read -r row_wal row_size <<<"$row"
  echo "# job_executions row: $row_wal B of WAL per single-row INSERT (10,000 in one transaction," \
       "pg_current_wal_insert_lsn diff ÷ 10,000); $row_size B per row (pg_column_size)"

  # pgbench: 8 clients, each transaction one INSERT of such a row.
  sql aw_tx_scratch -c "drop table job_executions" -c "$EXEC_DDL" -c "checkpoint"
  cat >"$WORK/insert.sql" <<EOF
\\set id random(1, 1000000000)
INSERT INTO job_executions (job_id, attempt, worker, finished_at) VALUES (:id, 1, '$WORKER_ID', clock_timestamp());
EOF
  lsn0=$(sql aw_tx_scratch -c "select pg_current_wal_lsn()")
  out=$("$PGBENCH" -h 127.0.0.1 -p "$PORT" -U postgres -n -c 8 -j 2 -T "$PGBENCH_SECONDS" \
          -f "$WORK/insert.sql" aw_tx_scratch 2>&1) || { echo "$out" >&2; die "pgbench failed"; }
  pg_wal=$(sql aw_tx_scratch -c "select pg_wal_lsn_diff(pg_current_wal_lsn(), '$lsn0')::bigint")
  tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p' <<<"$out")
  txns=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
  [ -n "$tps" ] && [ -n "$txns" ] || { echo "$out" >&2; die "cannot read pgbench's output"; }
  echo "# pgbench $("$PGBENCH" --version | awk '{ print $3 }'): -c 8 -j 2 -T $PGBENCH_SECONDS, one INSERT of a job_executions row" \
       "per transaction: $txns transactions, $(printf '%.0f' "$tps") tps (commits/s);" \
       "WAL $(fdiv "$pg_wal" "$txns" 0) B/transaction"
  echo "RESULT pgbench-insert jobs_per_sec=$(printf '%.0f' "$tps") jobs=$txns seconds=$PGBENCH_SECONDS"

  # The ceiling of a group's own SQL, without the worker: pgbench sends
  # the same INSERT PGBENCH_GROUP times a transaction, each in a savepoint
  # as a group's run is (the last one's release and the next one's
  # savepoint in one round trip, as job_store::transact sends them), from
  # 8 clients; then the same pipelined (-M extended, \startpipeline), the
  # round trips a client gets down to when it can send a savepoint with
  # the statement after it, which libpqxx 6 cannot. jobs/s = tps x group.
  if [ "$PGBENCH_GROUP" -gt 0 ]; then
    ins="INSERT INTO job_executions (job_id, attempt, worker, finished_at) VALUES (:id, 1, '$WORKER_ID', clock_timestamp());"
    {
      echo '\set id random(1, 1000000000)'
      echo 'BEGIN;'
      echo 'SAVEPOINT aw_run;'
      echo "$ins"
      for ((k = 1; k < PGBENCH_GROUP; k++)); do
        echo 'RELEASE SAVEPOINT aw_run \; SAVEPOINT aw_run;'
        echo "$ins"
      done
      echo 'COMMIT;'
    } >"$WORK/group.sql"
    {
      echo '\set id random(1, 1000000000)'
      echo '\startpipeline'
      echo 'BEGIN;'
      for ((k = 0; k < PGBENCH_GROUP; k++)); do
        echo 'SAVEPOINT aw_run;'
        echo "$ins"
        echo 'RELEASE SAVEPOINT aw_run;'
      done
      echo 'COMMIT;'
      echo '\endpipeline'
    } >"$WORK/group-pipelined.sql"
    for variant in group group-pipelined; do
      mode=simple; [ "$variant" = group ] || mode=extended
      out=$("$PGBENCH" -h 127.0.0.1 -p "$PORT" -U postgres -n -c 8 -j 2 -M "$mode" -T "$PGBENCH_SECONDS" \
              -f "$WORK/$variant.sql" aw_tx_scratch 2>&1) || { echo "$out" >&2; die "pgbench ($variant) failed"; }
      tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p' <<<"$out")
      [ -n "$tps" ] || { echo "$out" >&2; die "cannot read pgbench's output ($variant)"; }
      jps=$(awk -v t="$tps" -v g="$PGBENCH_GROUP" 'BEGIN { printf "%.0f", t * g }')
      echo "# pgbench-$variant: -c 8 -j 2 -M $mode, $PGBENCH_GROUP INSERTs a transaction, each in a savepoint:" \
           "$(printf '%.0f' "$tps") tps = $jps INSERTs/s"
      echo "RESULT pgbench-$variant$PGBENCH_GROUP jobs_per_sec=$jps"
    done
  fi
  sql postgres -c "drop database aw_tx_scratch"

  for c in ${CONCURRENCY//,/ }; do
    echo "# run: path=batched kind=noop group=- pool=- concurrency=$c jobs=$N"
    N=$N KIND=noop CONCURRENCY=$c LABEL=batched "$HERE/run.sh"
    pools=${TX_POOL:-8,$c}
    for pool in $(tr ',' '\n' <<<"$pools" | sort -nu); do
      for kind in ${TX_KINDS//,/ }; do
        groups=${TX_GROUP:--}
        for group in ${groups//,/ }; do
          qtoml=""
          [ "$group" = - ] || qtoml="transactional_group = $group"
          echo "# run: path=transactional kind=$kind group=$group pool=$pool concurrency=$c jobs=$N_TX"
          N=$N_TX KIND=$kind CONCURRENCY=$c DB_TOML="transactional_pool_size = $pool" QUEUE_TOML="$qtoml" \
            LABEL="$kind-pool$pool${qtoml:+-group$group}" "$HERE/run.sh"
        done
      done
    done
  done
} 2>&1 | tee "$LOG"

awk '
  function field(k,   i, kv) { for (i = 3; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) return kv[2] } return "?" }
  /^# job_executions row: / { roww = $4 }
  /^# pgbench / { match($0, /[0-9]+ tps/); pgb = substr($0, RSTART, RLENGTH - 4) }
  /^# pgbench-group/ { ceil[++nc] = $0 }
  /^# run: / { path = field("path"); kind = field("kind"); group = field("group"); pool = field("pool"); c = field("concurrency") }
  /^#   during drain: WAL/ {
    match($0, /\(([0-9]+) B\/job\)/); wal = substr($0, RSTART + 1, RLENGTH - 8)
    match($0, /\(([0-9.]+)\/job\)/); com = substr($0, RSTART + 1, RLENGTH - 6) }
  /^RESULT [^ ]+\/c[0-9]+\/p1\/run1 / {
    jps = $3; sub(/jobs_per_sec=/, "", jps)
    if (path == "batched") base[c] = jps
    p = (path == "batched" ? "batched" : "transactional, pool " pool)
    rows[++n] = sprintf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |", p, kind, group, c, jps,
      base[c] ? sprintf("%.3f", jps / base[c]) : "?", pgb ? sprintf("%.2f", jps / pgb) : "?",
      wal, roww ? sprintf("%.1f", wal / roww) : "?", com)
  }
  END {
    print ""
    print "| path | kind | group | concurrency | jobs/s | ÷ batched no-op | ÷ pgbench | WAL B/job | WAL ÷ row | commits/job |"
    print "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    for (i = 1; i <= n; i++) print rows[i]
    printf "\npgbench (-c 8 -j 2, one INSERT of a job_executions row per transaction): %.0f tps; " \
      "that row: %s B of WAL per INSERT (WAL ÷ row divides by it)\n", pgb, roww
    for (i = 1; i <= nc; i++) {
      line = ceil[i]; sub(/^# /, "", line); match(line, /= [0-9]+ INSERTs/)
      v = substr(line, RSTART + 2, RLENGTH - 10)
      printf "%s (%.2f x pgbench)\n", line, pgb ? v / pgb : 0
    }
  }' "$LOG" | tee -a "$LOG"
if [ -n "${OUT:-}" ]; then cp "$LOG" "$OUT"; fi
