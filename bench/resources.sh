#!/usr/bin/env bash
# bench/resources.sh - threads and memory of one `actor-worker run` process
# on a throwaway PostgreSQL:
#
#   1. idle: concurrency 5000, nothing to do: threads and RSS after IDLE_S
#      seconds; then busy: the same process drains BUSY_N no-op jobs
#      (peak threads while it does);
#   2. waiting: TIMER_N (10,000) `sleep` jobs of TIMER_MS (2,000) ms each,
#      concurrency 10,000: the builtin `sleep` kind is asynchronous (it
#      waits on a timer, not on a thread), so all run at once on a few
#      threads. Peak threads, peak RSS, and the time to finish them all
#      (about TIMER_MS when they really ran at once);
#   3. big args: BIG_N (50) jobs with BIG_MB (10) MB of args each,
#      concurrency 50: peak RSS, which the claim's byte bound
#      ([worker] local_queue_bytes, 64 MiB by default) keeps far below
#      BIG_N x BIG_MB.
#
#   bench/resources.sh
#
# Knobs: PORT (5496), PGDIR, BIN / BUILD_DIR (as in run.sh), IDLE_S (3),
# BUSY_N (100000), TIMER_N, TIMER_MS, BIG_N, BIG_MB.
# Output: `#` lines and RESULT lines:
#   RESULT resources/idle threads=.. rss_mb=..
#   RESULT resources/busy threads_max=..
#   RESULT resources/timers jobs=.. threads_max=.. rss_max_mb=.. seconds=..
#   RESULT resources/big_args jobs=.. mb_each=.. rss_max_mb=..
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
SCRIPT=resources.sh
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"
PORT=${PORT:-5496}
IDLE_S=${IDLE_S:-3}
BUSY_N=${BUSY_N:-100000}
TIMER_N=${TIMER_N:-10000}
TIMER_MS=${TIMER_MS:-2000}
BIG_N=${BIG_N:-50}
BIG_MB=${BIG_MB:-10}

"$ROOT/scripts/install-deps.sh"
bench_build
WORK=$(mktemp -d /tmp/aw-resources.XXXXXX)
WORKER_PID=""
BENCH_CLEANUP+=('[ -n "${KEEP_LOGS:-}" ] || rm -rf "$WORK"')
bench_start_pg
BENCH_CLEANUP+=('[ -z "$WORKER_PID" ] || kill -KILL "$WORKER_PID" 2>/dev/null || true')
echo "# resources.sh: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores; $BIN"

threads() { awk '/^Threads:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }
rss_mb() { awk '/^VmRSS:/ { printf "%.0f", $2 / 1024 }' "/proc/$1/status" 2>/dev/null || echo 0; }

# A fresh database and a worker on it with `concurrency`; sets WORKER_PID.
start_worker() {
  local db=$1 conc=$2
  sql postgres -c "drop database if exists $db" -c "create database $db"
  "$BIN" migrate --database-url "postgresql://postgres@127.0.0.1:$PORT/$db" --log-level warn
  cat >"$WORK/$db.toml" <<EOF
[database]
url = "postgresql://postgres@127.0.0.1:$PORT/$db"

[queues.default]
concurrency = $conc
EOF
  "$BIN" run --config "$WORK/$db.toml" 2>"$WORK/$db.log" &
  WORKER_PID=$!
  sleep 1
  kill -0 "$WORKER_PID" 2>/dev/null || { cat "$WORK/$db.log" >&2; die "the worker for $db did not start"; }
}
stop_worker() {
  kill -TERM "$WORKER_PID"
  local rc=0
  wait "$WORKER_PID" || rc=$?
  WORKER_PID=""
  [ "$rc" = 0 ] || die "the worker exited with $rc after SIGTERM"
}
# Samples threads and RSS every 50 ms until `sql $db $LEFT` says f; prints
# "max_threads max_rss_mb seconds".
sample_until_done() {
  local db=$1 left=$2 t0 mt=0 mr=0 t r
  t0=$(now)
  while [ "$(sql "$db" -c "$left")" = t ]; do
    t=$(threads "$WORKER_PID"); r=$(rss_mb "$WORKER_PID")
    [ "$t" -le "$mt" ] || mt=$t
    [ "$r" -le "$mr" ] || mr=$r
    kill -0 "$WORKER_PID" 2>/dev/null || die "the worker exited"
    [ "$(fsub "$(now)" "$t0" | cut -d. -f1)" -lt 600 ] || die "not done after 600 s"
    sleep 0.05
  done
  echo "$mt $mr $(fsub "$(now)" "$t0")"
}
UNFINISHED="select exists(select 1 from claim_batches where closed_at is null)
  or exists(select 1 from job_rows where state in ('available','running','scheduled')
            and ready_xid is null)
  or exists(select 1 from claim_cursors c, lateral (select 1 from job_rows r
              where r.queue = c.queue and r.priority = c.priority and r.ready_xid is not null
                and (r.ready_xid, r.id) > (c.last_xid, c.last_id)
              order by r.ready_xid, r.id limit 1) x)
  or not exists(select 1 from claim_cursors)"

# ---- 1. idle, then busy -------------------------------------------------------------------------
start_worker idle 5000
sleep "$IDLE_S"
IDLE_T=$(threads "$WORKER_PID"); IDLE_R=$(rss_mb "$WORKER_PID")
echo "# idle: concurrency 5000, after $((IDLE_S + 1)) s: $IDLE_T threads, RSS $IDLE_R MB"
echo "RESULT resources/idle threads=$IDLE_T rss_mb=$IDLE_R"
sql idle -c "insert into jobs_in (kind) select 'noop' from generate_series(1, $BUSY_N)"
read -r BUSY_T BUSY_R BUSY_S < <(sample_until_done idle "$UNFINISHED")
echo "# busy: $BUSY_N noop jobs in ${BUSY_S}s: at most $BUSY_T threads, RSS at most $BUSY_R MB"
echo "RESULT resources/busy threads_max=$BUSY_T"
stop_worker

# ---- 2. ten thousand timers at once ---------------------------------------------------------------
start_worker timers "$TIMER_N"
sql timers -c "insert into jobs_in (kind, args)
               select 'sleep', jsonb_build_object('ms', $TIMER_MS) from generate_series(1, $TIMER_N)"
read -r TIM_T TIM_R TIM_S < <(sample_until_done timers "$UNFINISHED")
DONE=$(sql timers -c "select count(*) from jobs where state = 'completed'")
[ "$DONE" = "$TIMER_N" ] || die "timers: $DONE of $TIMER_N completed"
echo "# timers: $TIMER_N sleep jobs of $TIMER_MS ms, concurrency $TIMER_N: all done in ${TIM_S}s; at most $TIM_T threads, RSS at most $TIM_R MB"
echo "RESULT resources/timers jobs=$TIMER_N threads_max=$TIM_T rss_max_mb=$TIM_R seconds=$TIM_S"
stop_worker

# ---- 3. big args ----------------------------------------------------------------------------------
start_worker big "$BIG_N"
sql big -c "insert into jobs_in (kind, args)
            select 'noop', jsonb_build_object('blob', repeat('x', $BIG_MB * 1024 * 1024))
              from generate_series(1, $BIG_N)"
read -r BIG_T BIG_R BIG_S < <(sample_until_done big "$UNFINISHED")
DONE=$(sql big -c "select count(*) from jobs where state = 'completed'")
[ "$DONE" = "$BIG_N" ] || die "big args: $DONE of $BIG_N completed"
echo "# big args: $BIG_N jobs of $BIG_MB MB args, concurrency $BIG_N: done in ${BIG_S}s; RSS at most $BIG_R MB (all args together: $((BIG_N * BIG_MB)) MB)"
echo "RESULT resources/big_args jobs=$BIG_N mb_each=$BIG_MB rss_max_mb=$BIG_R"
stop_worker
