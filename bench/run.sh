#!/usr/bin/env bash
# bench/run.sh - end-to-end throughput of actor-worker on a throwaway PostgreSQL cluster.
#
# Same shape as the peer benchmarks (shared/peers/bench_graphile_worker.sh, bench_pgboss.sh), so the
# figures can be put side by side when run on the same machine in the same session:
#
#   fresh database -> `actor-worker migrate` -> N `noop` jobs enqueued with ONE plain SQL statement
#   (INSERT INTO jobs (kind, args) SELECT ... FROM generate_series: the documented SQL contract)
#   -> ANALYZE + CHECKPOINT -> snapshot WAL position and committed transactions -> start P
#   `actor-worker run` processes -> time from their start until no job is left in state
#   available/scheduled/running (polled every POLL_MS over one persistent psql session) -> check every
#   job completed exactly once (N rows, all state 'completed' with attempt = 1, no dead letters)
#   -> SIGTERM the workers, wait for them -> WAL bytes and commits per job -> drop the database.
#
# The server is started with scripts/pg.sh (PG_FRESH=1) in its own dir under /tmp: initdb defaults
# (shared_buffers=128MB, synchronous_commit=on, fsync=on, ...) except max_connections=200, which
# pg.sh sets for the test suites. The settings are printed at the start. The cluster is always
# stopped (and its dir removed unless KEEP_DATA is set) on exit.
#
# Env knobs (lists are comma-separated; every combination is run, REPS times, interleaved):
#   N (50000)            jobs per run
#   REPS (2)             repetitions of every configuration
#   CONCURRENCY (500)    [queues.default] concurrency per process (= handler threads per process);
#                        500 was the best of 50, 200, 500, 1000 on a 2-core machine (bench/README.md)
#   POOL_SIZE (2)        [database] pool_size (the product default): 1 claim connection + POOL_SIZE-1 outcome connections
#   PROCS (1,2)          worker processes (each with the concurrency and pool above)
#   RETENTION (24h)      [worker] completed_retention. "0" deletes rows at completion (like graphile-
#                        worker); the check is then weaker: no row and no dead letter left
#   POLL_INTERVAL (1s)   [worker] poll_interval (idle polling only; the bulk INSERT's NOTIFY and
#                        full claims drive the drain)
#   PORT (5498)          port of the throwaway cluster; the script refuses to run if it is busy
#   PGDIR (/tmp/aw-bench-pg)  cluster dir;  KEEP_DATA=1 keeps it after the run
#   BIN                  an actor-worker binary to use instead of building build-bench/ (Release)
#   BUILD_DIR (<repo>/build-bench)
#   POLL_MS (20)         drain poll period;  RUN_TIMEOUT (600) seconds before a run is failed
#   LOG_LEVEL (info)     worker log level (not debug: that logs a line per job)
#
# Output: one "RESULT actor-worker/<config>/run<k> jobs_per_sec=.. jobs=.. seconds=.." line per run
# with "#" diagnostic lines before it, then a summary and, as the last line,
# "RESULT actor-worker jobs_per_sec=.. jobs=.. seconds=.." for the best run of the FIRST configuration
# (by default 1 process, comparable to graphile-worker's batch:1 summary line).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")

N=${N:-50000}
REPS=${REPS:-2}
CONCURRENCY=${CONCURRENCY:-500}
POOL_SIZE=${POOL_SIZE:-2}
PROCS=${PROCS:-1,2}
POLL_INTERVAL=${POLL_INTERVAL:-1s}
RETENTION=${RETENTION:-24h}
PORT=${PORT:-5498}
PGDIR=${PGDIR:-/tmp/aw-bench-pg}
BUILD_DIR=${BUILD_DIR:-$ROOT/build-bench}
POLL_MS=${POLL_MS:-20}
RUN_TIMEOUT=${RUN_TIMEOUT:-600}
LOG_LEVEL=${LOG_LEVEL:-info}

die() { echo "bench/run.sh: $*" >&2; exit 1; }
now() { echo "$EPOCHREALTIME"; }                         # wall clock, no fork
fsub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a - b }'; }
fdiv() { awk -v a="$1" -v b="$2" -v p="${3:-3}" 'BEGIN { printf "%.*f", p, (b == 0 ? 0 : a / b) }'; }
TICKS=$(getconf CLK_TCK)
# CPU seconds (user + system) a process has used so far; 0 if it is gone.
proc_cpu() {
  local f
  f=$(cat "/proc/$1/stat" 2>/dev/null) || { echo 0; return; }
  f=${f##*) }   # drop "pid (comm) "; utime and stime are then fields 12 and 13
  awk -v t="$TICKS" '{ printf "%.2f", ($12 + $13) / t }' <<<"$f"
}
# machine-wide CPU jiffies: "busy total"
machine_cpu() { awk '/^cpu / { t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t }' /proc/stat; }

# ---- a busy port is refused before anything else ------------------------------------------------
if (exec 3<>/dev/tcp/127.0.0.1/"$PORT") 2>/dev/null; then
  die "port $PORT on 127.0.0.1 is already in use; refusing to start (set PORT=...)"
fi

# ---- the binary ----------------------------------------------------------------------------------
if [ -n "${BIN:-}" ]; then
  [ -x "$BIN" ] || die "BIN=$BIN is not an executable"
else
  echo "# building actor-worker (Release) in $BUILD_DIR" >&2
  cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DAW_BUILD_TESTS=OFF >/dev/null \
    || die "cmake configure failed"
  cmake --build "$BUILD_DIR" -j2 --target actor-worker >/dev/null || die "build failed (see above)"
  BIN=$BUILD_DIR/actor-worker
fi

# ---- throwaway cluster ---------------------------------------------------------------------------
WORK=$(mktemp -d /tmp/aw-bench.XXXXXX)       # configs and worker logs of this invocation
cleanup() {
  local pid
  for pid in ${WORKER_PIDS:-}; do kill -KILL "$pid" 2>/dev/null || true; done
  "$ROOT/scripts/pg.sh" stop "$PGDIR" || true
  if [ -z "${KEEP_DATA:-}" ]; then rm -rf "$PGDIR" "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
"$ROOT/scripts/pg.sh" stop "$PGDIR" || true    # a server left over by an interrupted run of ours
PG_FRESH=1 "$ROOT/scripts/pg.sh" start "$PGDIR" "$PORT"

PSQL=(psql -X -q -A -t -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PORT" -U postgres)
sql() { local db=$1; shift; PGOPTIONS="-c client_min_messages=warning" "${PSQL[@]}" -d "$db" "$@"; }
echo "# postgres: $(sql postgres -c 'select version()')"
echo "# settings (initdb defaults; scripts/pg.sh sets listen address, port, socket dir, max_connections=200):"
sql postgres -F '=' -c "select name, current_setting(name) from pg_settings where name in
  ('shared_buffers','synchronous_commit','fsync','full_page_writes','wal_level','max_wal_size',
   'checkpoint_timeout','max_connections','work_mem','autovacuum') order by 1" | sed 's/^/#   /'
echo "# actor-worker: $BIN; cores $(nproc); N=$N REPS=$REPS CONCURRENCY=$CONCURRENCY POOL_SIZE=$POOL_SIZE PROCS=$PROCS" \
     "POLL_INTERVAL=$POLL_INTERVAL RETENTION=$RETENTION"

# ---- one run -------------------------------------------------------------------------------------
# Persistent psql session used for snapshots and the drain poll (one connection, like the peers'
# driver client, rather than a new backend every 20 ms). q SQL -> prints the one-line answer.
open_session() {
  coproc SESSION { "${PSQL[@]}" -d "$1" 2>&1; }
  exec {SLEEP_FD}<> <(:)                  # read -t on this fd sleeps without forking
}
q() {
  local line
  printf '%s\n' "$1" >&"${SESSION[1]}"
  IFS= read -r line <&"${SESSION[0]}" || die "psql session ended (query: $1)"
  echo "$line"
}
close_session() {
  local pid=$SESSION_PID
  printf '\\q\n' >&"${SESSION[1]}"
  wait "$pid" 2>/dev/null || true
  exec {SLEEP_FD}>&-
}

RESULTS=()   # "config jps seconds"
one_run() {
  local conc=$1 pool=$2 procs=$3 rep=$4
  local cfgname="c$conc/pool$pool/p$procs"
  local db="awbench_c${conc}_pool${pool}_p${procs}_r${rep}"
  local url="postgresql://postgres@127.0.0.1:$PORT/$db"

  sql postgres -c "drop database if exists $db" -c "create database $db"
  "$BIN" migrate --database-url "$url" --log-level warn

  # Bulk enqueue: one statement (the NOTIFY trigger fires once for it; nobody listens yet).
  local tq te
  tq=$(now)
  sql "$db" -c "insert into jobs (kind, args)
                select 'noop', jsonb_build_object('id', i) from generate_series(1, $N) as i"
  te=$(fsub "$(now)" "$tq")
  local queued
  queued=$(sql "$db" -c "select count(*) from jobs where state = 'available'")
  [ "$queued" = "$N" ] || die "expected $N queued jobs, found $queued"
  sql "$db" -c "analyze jobs" -c "checkpoint"

  # One TOML config per process. Completed rows are kept by default (the production default
  # retention), so the exactly-once check below can read them.
  local i cfgfile
  for ((i = 1; i <= procs; i++)); do
    cfgfile=$WORK/$db.p$i.toml
    cat >"$cfgfile" <<EOF
[database]
url = "$url"
pool_size = $pool

[worker]
node = "bench$i"
poll_interval = "$POLL_INTERVAL"
completed_retention = "$RETENTION"
shutdown_drain = "2s"

[queues.default]
concurrency = $conc
EOF
  done

  open_session "$db"
  local own_tx=0 snap0 load1 mc0 t0
  load1=$(cut -d' ' -f1 /proc/loadavg)
  snap0=$(q "select pg_current_wal_lsn(), xact_commit from pg_stat_database where datname = current_database();")
  own_tx=2   # this session's own startup transaction (flushed to the stats later) and snap0
  mc0=$(machine_cpu)
  t0=$(now)
  WORKER_PIDS=""
  for ((i = 1; i <= procs; i++)); do
    "$BIN" run --config "$WORK/$db.p$i.toml" --log-level "$LOG_LEVEL" 2>"$WORK/$db.p$i.log" &
    WORKER_PIDS+=" $!"
  done

  # Drain poll: one statement, so one snapshot for both tests. The ORDER BY ... LIMIT 1 form keeps
  # the first test on the claim index (an EXISTS would be planned as a seq scan over all rows,
  # costing ms per poll near the end); the second uses the partial index of running rows.
  local polls=0 left pid
  while :; do
    left=$(q "select (select id from jobs where state in ('available', 'scheduled')
                       order by queue, priority, run_at, id limit 1) is not null
                  or exists(select 1 from jobs where state = 'running');")
    polls=$((polls + 1))
    [ "$left" = f ] && break
    [ "$left" = t ] || die "unexpected poll answer: $left"
    for pid in $WORKER_PIDS; do
      kill -0 "$pid" 2>/dev/null || { cat "$WORK/$db".p*.log >&2; die "worker $pid exited during the run"; }
    done
    if [ "$(fsub "$(now)" "$t0" | cut -d. -f1)" -ge "$RUN_TIMEOUT" ]; then
      die "run timed out after $RUN_TIMEOUT s"
    fi
    read -r -t "$(fdiv "$POLL_MS" 1000)" -u "$SLEEP_FD" || true
  done
  local t1 sec mc1
  t1=$(now)
  mc1=$(machine_cpu)
  sec=$(fsub "$t1" "$t0")

  # CPU of the workers and of their PostgreSQL backends, read before they exit.
  local wcpu=0 bcpu=0 bpids
  for pid in $WORKER_PIDS; do wcpu=$(awk -v a="$wcpu" -v b="$(proc_cpu "$pid")" 'BEGIN { print a + b }'); done
  bpids=$(q "select string_agg(pid::text, ' ') from pg_stat_activity
              where datname = current_database() and pid <> pg_backend_pid();")
  own_tx=$((own_tx + 1))
  for pid in $bpids; do bcpu=$(awk -v a="$bcpu" -v b="$(proc_cpu "$pid")" 'BEGIN { print a + b }'); done

  # Stop the workers (graceful: SIGTERM, then wait).
  for pid in $WORKER_PIDS; do kill -TERM "$pid"; done
  local rc
  for pid in $WORKER_PIDS; do
    rc=0; wait "$pid" || rc=$?
    [ "$rc" = 0 ] || { cat "$WORK/$db".p*.log >&2; die "worker $pid exited with status $rc after SIGTERM"; }
  done
  WORKER_PIDS=""
  close_session
  sleep 0.5   # exited backends flush their statistics

  # WAL and commits during the drain; the exactly-once check.
  local snap1 lsn0 xc0 lsn1 xc1 wal commits check
  snap1=$(sql "$db" -F'|' -c "select pg_current_wal_lsn(), xact_commit from pg_stat_database where datname = current_database()")
  IFS='|' read -r lsn0 xc0 <<<"$snap0"
  IFS='|' read -r lsn1 xc1 <<<"$snap1"
  wal=$(sql "$db" -c "select pg_wal_lsn_diff('$lsn1', '$lsn0')::bigint")
  commits=$((xc1 - xc0 - polls - own_tx))
  check=$(sql "$db" -F' ' -c "select count(*), count(*) filter (where state = 'completed' and attempt = 1),
                                     (select count(*) from dead_letter_jobs) from jobs")
  local want="$N $N 0" checked="completed exactly once"
  if [ "$RETENTION" = 0 ]; then want="0 0 0" checked="completed (rows deleted at completion)"; fi
  [ "$check" = "$want" ] || die "job check failed: rows, completed with attempt 1, dead letters = $check (want $want)"

  # Batch sizes, read from the rows: a claim statement stamps all its rows with one locked_at (its
  # transaction's now()), an outcome commit stamps its rows with one finalized_at.
  local batches claims claim_max outcome_tx outcome_max
  batches=$(sql "$db" -F' ' -c "select (select count(*) from (select distinct locked_by, locked_at from jobs) c),
                                       (select max(n) from (select count(*) n from jobs group by locked_by, locked_at) c),
                                       (select count(*) from (select distinct locked_by, finalized_at from jobs) f),
                                       (select max(n) from (select count(*) n from jobs group by locked_by, finalized_at) f)")
  read -r claims claim_max outcome_tx outcome_max <<<"$batches"

  # Startup: from spawning the processes to the (last) "worker ... running" log line.
  local up_ms=-1 ts
  for ((i = 1; i <= procs; i++)); do
    ts=$(sed -n 's/^\[\([0-9-]* [0-9:.]*\)\] .* running: .*/\1/p' "$WORK/$db.p$i.log" | head -n1)
    if [ -n "$ts" ]; then
      up_ms=$(awk -v a="$(date -d "$ts" +%s.%N)" -v b="$t0" -v m="$up_ms" \
                'BEGIN { x = (a - b) * 1000; printf "%.0f", (x > m ? x : m) }')
    fi
  done
  [ "$up_ms" != -1 ] || up_ms="?"   # the log line was not found
  grep -h -E '\] \[(warning|error|critical)\]' "$WORK/$db".p*.log | head -n 5 | sed 's/^/#   worker log: /' || true

  local jps busy
  jps=$(fdiv "$N" "$sec" 0)
  read -r b0 tt0 <<<"$mc0"; read -r b1 tt1 <<<"$mc1"
  busy=$(fdiv "$((100 * (b1 - b0)))" "$((tt1 - tt0))" 0)
  echo "# actor-worker $cfgname run=$rep: enqueue $N in ${te}s ($(fdiv "$N" "$te" 0) jobs/s); workers up after ~${up_ms}ms;" \
       "drained in ${sec}s ($polls polls); $N jobs $checked"
  echo "#   during drain: WAL $(fdiv "$wal" 1000000 1) MB ($(fdiv "$wal" "$N" 0) B/job); commits ~$commits ($(fdiv "$commits" "$N" 3)/job);" \
       "worker-process CPU ${wcpu} s ($(fdiv "$(fdiv "$wcpu" "$sec" 4)" 0.01 0)% of one core); their postgres backends CPU ${bcpu} s;" \
       "machine CPU busy ${busy}% of $(nproc) cores (all processes); load1 at start $load1"
  if [ "$RETENTION" != 0 ]; then   # (deleted rows tell nothing)
    echo "#   batches: $claims claims ($(fdiv "$N" "$claims" 1) jobs/claim on average, largest $claim_max);" \
         "$outcome_tx outcome commits ($(fdiv "$N" "$outcome_tx" 1) jobs/commit on average, largest $outcome_max)"
  fi
  echo "RESULT actor-worker/$cfgname/run$rep jobs_per_sec=$jps jobs=$N seconds=$sec"
  RESULTS+=("$cfgname $jps $sec")

  sql postgres -c "drop database $db"
}

# ---- all runs ------------------------------------------------------------------------------------
IFS=, read -r -a CONCS <<<"$CONCURRENCY"
IFS=, read -r -a POOLS <<<"$POOL_SIZE"
IFS=, read -r -a PROCSS <<<"$PROCS"
CONFIGS=()
for c in "${CONCS[@]}"; do for p in "${POOLS[@]}"; do for n in "${PROCSS[@]}"; do
  CONFIGS+=("$c $p $n")
done; done; done
for ((rep = 1; rep <= REPS; rep++)); do
  for cfg in "${CONFIGS[@]}"; do
    # shellcheck disable=SC2086
    one_run $cfg "$rep"
  done
done

echo "# summary (jobs/s per run):"
for cfg in "${CONFIGS[@]}"; do
  read -r c p n <<<"$cfg"
  name="c$c/pool$p/p$n"
  printf '#   %-18s %s\n' "$name:" "$(printf '%s\n' "${RESULTS[@]}" | awk -v k="$name" '$1 == k { printf "%s%s", (s++ ? ", " : ""), $2 }')"
done
read -r c p n <<<"${CONFIGS[0]}"
best=$(printf '%s\n' "${RESULTS[@]}" | awk -v k="c$c/pool$p/p$n" '$1 == k && $2 > b { b = $2; s = $3 } END { print b, s }')
read -r best_jps best_sec <<<"$best"
echo "RESULT actor-worker jobs_per_sec=$best_jps jobs=$N seconds=$best_sec"
