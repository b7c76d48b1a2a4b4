#!/usr/bin/env bash
# bench/run.sh - drain throughput of actor-worker on a throwaway PostgreSQL.
#
# The same shape as bench/peers/graphile_worker.sh and bench/peers/pgboss.sh,
# so the figures can be put side by side when run on the same machine in the
# same hour (bench/compare.sh runs all three on one server):
#
#   fresh database -> `actor-worker migrate` -> N `noop` jobs enqueued with
#   ONE plain SQL statement through the public contract (INSERT INTO jobs_in
#   (kind, args) SELECT ... FROM generate_series) -> ANALYZE + CHECKPOINT ->
#   snapshot WAL position and committed transactions -> start P
#   `actor-worker run` processes (shipped defaults except `concurrency`) ->
#   time from their start until no job is left unfinished (polled every
#   POLL_MS over one persistent psql session) -> SIGTERM the workers, wait
#   -> check every job ran exactly once (the workers' handler counts sum to
#   N, every job is completed, no dead letter) -> WAL bytes, commits and CPU
#   per job -> drop the database.
#
# The clock includes starting the processes (graphile-worker's and
# pg-boss's include their library start, not the Node process start).
#
# Server: started with scripts/pg.sh (initdb defaults: shared_buffers=128MB,
# synchronous_commit=on, fsync=on, ...; pg.sh also sets max_connections=200)
# and always stopped on exit. BENCH_EXTERNAL_PG=1 uses a server already
# running on 127.0.0.1:$PORT instead (bench/compare.sh does).
#
# Knobs (lists are comma-separated; every combination runs, REPS times):
#   N (200000)              jobs per run
#   REPS (1)                repetitions of every configuration
#   CONCURRENCY (10,64,500) [queues.default] concurrency per process
#   PROCS (1,2)             worker processes
#   EXTRA_TOML ("")         more [worker] keys, e.g. 'completed_retention = "0"'
#   QUEUE_TOML ("")         more [queues.default] keys, e.g.
#                           'global_concurrency = 64' or 'rate_limit = "20000/s"'
#   DB_TOML ("")            more [database] keys, e.g. 'pooler = "transaction"';
#                           @URL@ in it stands for the run's database straight
#                           on PORT (listen_url = "@URL@")
#   PORT (5498)             server port;  PGDIR (/tmp/aw-bench-pg-$$) its dir
#   WORKER_PORT (PORT)      the port the workers' url connects to (a pooler in
#                           front of the server: bench/pgbouncer.sh); migrate,
#                           the enqueue, the drain poll and the checks go
#                           straight to PORT
#   BIN                     an actor-worker binary (default: build Release
#                           into BUILD_DIR, <repo>/build-bench)
#   ENQUEUE (sql)           how the backlog is enqueued: sql (one INSERT INTO
#                           jobs ... SELECT, the SQL contract) or copy
#                           (psql's \copy of N rows into jobs: COPY)
#   KIND (noop)             the kind of the backlog's jobs: noop (a non-blocking
#                           handler), noop_tx (a transactional handler that
#                           does nothing: each job completes in a transaction
#                           of its own; bench/transactional.sh) or record_tx
#                           (args {"ms": 0}: a transactional handler inserting
#                           one row into job_executions, which this script
#                           creates; the check also counts one row per job)
#   HOLD (0)                1: a session holds a transaction id open in
#                           another database of the server from before the
#                           backlog is inserted to the end of the drain (an
#                           idle-in-transaction client); same: in the run's
#                           own database
#   POLL_MS (20)            drain poll period; RUN_TIMEOUT (600) s per run
#   LOG_LEVEL (info)        worker log level
#
# Output: per run, `#` diagnostic lines and
#   RESULT actor-worker/c<concurrency>/p<procs>/run<k> jobs_per_sec=.. jobs=.. seconds=..
#   (LABEL in place of actor-worker when set: compare.sh's A/B)
# then a summary and `RESULT actor-worker jobs_per_sec=..` for the best run
# of the first configuration. The diagnostic line
#   #   during drain: WAL X MB (N B/job); commits ~C (R/job); worker-process CPU S s (...)
# has the peers' format.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")

N=${N:-200000}
REPS=${REPS:-1}
CONCURRENCY=${CONCURRENCY:-10,64,500}
PROCS=${PROCS:-1,2}
EXTRA_TOML=${EXTRA_TOML:-}
QUEUE_TOML=${QUEUE_TOML:-}
DB_TOML=${DB_TOML:-}
PORT=${PORT:-5498}
WORKER_PORT=${WORKER_PORT:-$PORT}
PGDIR=${PGDIR:-/tmp/aw-bench-pg-$$}
BUILD_DIR=${BUILD_DIR:-$ROOT/build-bench}
POLL_MS=${POLL_MS:-20}
RUN_TIMEOUT=${RUN_TIMEOUT:-600}
LOG_LEVEL=${LOG_LEVEL:-info}

die() { echo "bench/run.sh: $*" >&2; exit 1; }
now() { echo "$EPOCHREALTIME"; }
fsub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a - b }'; }
fdiv() { awk -v a="$1" -v b="$2" -v p="${3:-3}" 'BEGIN { printf "%.*f", p, (b == 0 ? 0 : a / b) }'; }
TICKS=$(getconf CLK_TCK)
# CPU seconds (user + system) a process has used so far; 0 if it is gone.
proc_cpu() {
  local f
  f=$(cat "/proc/$1/stat" 2>/dev/null) || { echo 0; return; }
  f=${f##*) }
  awk -v t="$TICKS" '{ printf "%.2f", ($12 + $13) / t }' <<<"$f"
}
# machine-wide CPU jiffies: "busy total"
machine_cpu() { awk '/^cpu / { t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t }' /proc/stat; }

# ---- the binary ----------------------------------------------------------------------------------
ENQUEUE=${ENQUEUE:-sql}
KIND=${KIND:-noop}
case "$KIND" in noop|noop_tx|record_tx) ;; *) die "KIND is noop, noop_tx or record_tx, not '$KIND'" ;; esac
# record_tx's args: {"ms": 0} (no sleep in its transaction).
ARGS_MS=""
[ "$KIND" = record_tx ] && ARGS_MS=", 'ms', 0"
case "$ENQUEUE" in sql|copy) ;; *) die "ENQUEUE is sql or copy, not '$ENQUEUE'" ;; esac
HOLD=${HOLD:-0}
case "$HOLD" in 0|1|same) ;; *) die "HOLD is 0, 1 or same, not '$HOLD'" ;; esac
LABEL=${LABEL:-actor-worker}
if [ -n "${BIN:-}" ]; then
  [ -x "$BIN" ] || die "BIN=$BIN is not an executable"
else
  echo "# building actor-worker (Release) in $BUILD_DIR" >&2
  cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DAW_BUILD_TESTS=OFF >/dev/null \
    || die "cmake configure failed"
  cmake --build "$BUILD_DIR" -j"$(nproc)" --target actor-worker >/dev/null || die "build failed"
  BIN=$BUILD_DIR/actor-worker
fi

# ---- the server ----------------------------------------------------------------------------------
WORK=$(mktemp -d /tmp/aw-bench.XXXXXX)
WORKER_PIDS=""
HOLDER_PID=""
cleanup() {
  local pid
  for pid in $WORKER_PIDS $HOLDER_PID; do kill -KILL "$pid" 2>/dev/null || true; done
  if [ -z "${BENCH_EXTERNAL_PG:-}" ]; then
    "$ROOT/scripts/pg.sh" stop "$PGDIR" || true
    [ -n "${KEEP_DATA:-}" ] || rm -rf "$PGDIR"
  fi
  [ -n "${KEEP_DATA:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if [ -z "${BENCH_EXTERNAL_PG:-}" ]; then
  if (exec 3<>/dev/tcp/127.0.0.1/"$PORT") 2>/dev/null; then
    die "port $PORT on 127.0.0.1 is already in use; refusing to start (set PORT=...)"
  fi
  PG_FRESH=1 "$ROOT/scripts/pg.sh" start "$PGDIR" "$PORT"
fi

PSQL=(psql -X -q -A -t -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PORT" -U postgres)
sql() { local db=$1; shift; PGOPTIONS="-c client_min_messages=warning" "${PSQL[@]}" -d "$db" "$@"; }
echo "# postgres: $(sql postgres -c 'select version()')"
echo "# settings:"
sql postgres -F '=' -c "select name, current_setting(name) from pg_settings where name in
  ('shared_buffers','synchronous_commit','fsync','full_page_writes','wal_level','max_wal_size',
   'checkpoint_timeout','max_connections','work_mem','autovacuum') order by 1" | sed 's/^/#   /'
echo "# actor-worker: $BIN; cores $(nproc); N=$N ENQUEUE=$ENQUEUE HOLD=$HOLD REPS=$REPS CONCURRENCY=$CONCURRENCY PROCS=$PROCS EXTRA_TOML=${EXTRA_TOML:-none} QUEUE_TOML=${QUEUE_TOML:-none}"
[ "$WORKER_PORT" = "$PORT" ] && [ -z "$DB_TOML" ] \
  || echo "# workers connect to port $WORKER_PORT (server: $PORT); DB_TOML=${DB_TOML//$'\n'/; }"

# One psql session for snapshots and the drain poll (one backend, like the
# peers' driver client, not a new one every POLL_MS).
open_session() {
  coproc SESSION { "${PSQL[@]}" -d "$1" 2>&1; }
  exec {SLEEP_FD}<> <(:)
}
q() {
  local line
  q_into line "$1"
  echo "$line"
}
# The same into variable $1, without a subshell: the drain poll runs every
# POLL_MS on the same two cores as the worker, so it forks no process (a
# fork and an awk per poll took about a fifth of the machine, measured
# with perf; the peers poll from inside their Node process).
q_into() {
  local -n into=$1
  printf '%s\n' "$2" >&"${SESSION[1]}"
  IFS= read -r into <&"${SESSION[0]}" || die "psql session ended (query: $2)"
}
close_session() {
  local pid=$SESSION_PID
  printf '\\q\n' >&"${SESSION[1]}"
  wait "$pid" 2>/dev/null || true
  exec {SLEEP_FD}>&-
}

# Anything left to do? Fewer jobs finished than enqueued: the lane jobs the
# receipts hold, the jobs off the lanes that finished, the dead letters
# (a few thousand receipt rows for the whole drain: cheap every POLL_MS).
# Receipts hold their jobs as bits since 0.2, as id arrays before (an A/B
# against an older build, compare.sh's BASE_BIN).
left_sql() {
  if [ "$(sql "$1" -c "select to_regclass('jobs_in') is not null")" = t ]; then
    LEFT_SQL="select (select coalesce(sum(bit_count(mask::bit(64))), 0) from batch_receipts where done)
      + (select count(*) from jobs_in where ready_xid = '0' and state in ('completed', 'cancelled'))
      + (select count(*) from dead_letter_jobs) < $N;"
  else
    LEFT_SQL="select (select coalesce(sum(cardinality(ids)), 0) from batch_receipts where done)
      + (select count(*) from jobs where ready_xid = '0' and state in ('completed', 'cancelled'))
      + (select count(*) from dead_letter_jobs) < $N;"
  fi
}
# A session holding a transaction id open (HOLD), until the run ends.
start_holder() {
  local db=$1
  [ "$HOLD" = 0 ] && return
  [ "$HOLD" = 1 ] && db=postgres
  mkfifo "$WORK/holder.in"
  "${PSQL[@]}" -d "$db" <"$WORK/holder.in" >/dev/null 2>&1 &
  HOLDER_PID=$!
  exec {HOLD_FD}>"$WORK/holder.in"
  printf 'begin;\nselect txid_current();\n' >&"$HOLD_FD"
  # Held once the server shows its xid.
  local tries=0
  while [ "$(sql postgres -c "select count(*) from pg_stat_activity where pid in
           (select pid from pg_stat_activity where backend_xid is not null and state = 'idle in transaction')")" = 0 ]; do
    tries=$((tries + 1)); [ "$tries" -lt 200 ] || die "the holding transaction did not start"
    sleep 0.02
  done
}
stop_holder() {
  [ -n "$HOLDER_PID" ] || return 0
  printf 'rollback;\n\\q\n' >&"$HOLD_FD"
  exec {HOLD_FD}>&-
  wait "$HOLDER_PID" 2>/dev/null || true
  HOLDER_PID=""
  rm -f "$WORK/holder.in"
}

RESULTS=()
one_run() {
  local conc=$1 procs=$2 rep=$3
  local cfgname="c$conc/p$procs"
  local db="awbench_c${conc}_p${procs}_r${rep}"
  local url="postgresql://postgres@127.0.0.1:$PORT/$db"
  local worker_url="postgresql://postgres@127.0.0.1:$WORKER_PORT/$db"

  # WITH (FORCE): a pooler in front (WORKER_PORT) may still hold server
  # sessions of the database after its workers stopped.
  sql postgres -c "drop database if exists $db with (force)" -c "create database $db"
  "$BIN" migrate --database-url "$url" --log-level warn
  # record_tx's table: no migration creates it (app/builtin_kinds.hpp).
  if [ "$KIND" = record_tx ]; then
    sql "$db" -c "create table job_executions (
                    id bigserial primary key, job_id bigint not null, attempt integer not null,
                    worker text not null, started_at timestamptz not null default clock_timestamp(),
                    finished_at timestamptz)"
  fi

  start_holder "$db"
  local tq te into
  # The relation to write to: jobs_in, or jobs for a binary before 0.2
  # (an A/B against an older build, compare.sh's BASE_BIN).
  into=$(sql "$db" -c "select coalesce(to_regclass('jobs_in')::text, 'jobs')")
  left_sql "$db"
  if [ "$ENQUEUE" = copy ]; then
    [ -f "$WORK/jobs.copy" ] || awk -v n="$N" -v k="$KIND" 'BEGIN { for (i = 1; i <= n; i++) printf "%s\t{\"id\": %d%s}\n", k, i, (k == "record_tx" ? ", \"ms\": 0" : "") }' >"$WORK/jobs.copy"
  fi
  tq=$(now)
  if [ "$ENQUEUE" = copy ]; then
    sql "$db" -c "\\copy $into (kind, args) from '$WORK/jobs.copy'"
  else
    sql "$db" -c "insert into $into (kind, args)
                  select '$KIND', jsonb_build_object('id', i$ARGS_MS) from generate_series(1, $N) as i"
  fi
  te=$(fsub "$(now)" "$tq")
  [ "$(sql "$db" -c "select count(*) from jobs")" = "$N" ] \
    || die "expected $N queued jobs"
  sql "$db" -c "analyze" -c "checkpoint"

  local i
  for ((i = 1; i <= procs; i++)); do
    cat >"$WORK/$db.p$i.toml" <<EOF
[database]
url = "$worker_url"
${DB_TOML//@URL@/$url}

[worker]
node = "bench$i"
$EXTRA_TOML

[queues.default]
concurrency = $conc
$QUEUE_TOML
EOF
  done

  open_session "$db"
  local own_tx=2 snap0 load1 mc0 t0
  load1=$(cut -d' ' -f1 /proc/loadavg)
  snap0=$(q "select pg_current_wal_lsn(), xact_commit from pg_stat_database where datname = current_database();")
  mc0=$(machine_cpu)
  t0=$(now)
  WORKER_PIDS=""
  for ((i = 1; i <= procs; i++)); do
    "$BIN" run --config "$WORK/$db.p$i.toml" --log-level "$LOG_LEVEL" 2>"$WORK/$db.p$i.log" &
    WORKER_PIDS+=" $!"
  done

  local polls=0 left pid poll_s t0_us=${t0/[.,]/}
  poll_s=$(fdiv "$POLL_MS" 1000)
  while :; do
    q_into left "$LEFT_SQL"
    polls=$((polls + 1))
    [ "$left" = f ] && break
    [ "$left" = t ] || die "unexpected poll answer: $left"
    for pid in $WORKER_PIDS; do
      kill -0 "$pid" 2>/dev/null || { cat "$WORK/$db".p*.log >&2; die "worker $pid exited during the run"; }
    done
    if (( (${EPOCHREALTIME/[.,]/} - t0_us) / 1000000 >= RUN_TIMEOUT )); then
      die "run timed out after $RUN_TIMEOUT s"
    fi
    read -r -t "$poll_s" -u "$SLEEP_FD" || true
  done
  local t1 sec mc1
  t1=$(now)
  mc1=$(machine_cpu)
  sec=$(fsub "$t1" "$t0")

  local wcpu=0 bcpu=0 bpids
  for pid in $WORKER_PIDS; do wcpu=$(awk -v a="$wcpu" -v b="$(proc_cpu "$pid")" 'BEGIN { print a + b }'); done
  bpids=$(q "select string_agg(pid::text, ' ') from pg_stat_activity
              where datname = current_database() and pid <> pg_backend_pid();")
  own_tx=$((own_tx + 1))
  for pid in $bpids; do bcpu=$(awk -v a="$bcpu" -v b="$(proc_cpu "$pid")" 'BEGIN { print a + b }'); done

  for pid in $WORKER_PIDS; do kill -TERM "$pid"; done
  local rc
  for pid in $WORKER_PIDS; do
    rc=0; wait "$pid" || rc=$?
    [ "$rc" = 0 ] || { cat "$WORK/$db".p*.log >&2; die "worker $pid exited with status $rc after SIGTERM"; }
  done
  WORKER_PIDS=""
  close_session
  stop_holder
  sleep 0.5   # exited backends flush their statistics

  local snap1 lsn0 xc0 lsn1 xc1 wal commits
  snap1=$(sql "$db" -F'|' -c "select pg_current_wal_lsn(), xact_commit from pg_stat_database where datname = current_database()")
  IFS='|' read -r lsn0 xc0 <<<"$snap0"
  IFS='|' read -r lsn1 xc1 <<<"$snap1"
  wal=$(sql "$db" -c "select pg_wal_lsn_diff('$lsn1', '$lsn0')::bigint")
  commits=$((xc1 - xc0 - polls - own_tx))

  # Exactly once: the handlers that ran, as the workers count them, and the
  # jobs completed on their first attempt, as jobs_live shows them.
  local ran done_n dead
  ran=$(sed -n 's/.* \([0-9][0-9]*\) handler(s) ran;.*/\1/p' "$WORK/$db".p*.log | awk '{ s += $1 } END { print s + 0 }')
  done_n=$(sql "$db" -c "select count(*) from jobs_live where state = 'completed' and attempt = 1")
  dead=$(sql "$db" -c "select count(*) from dead_letter_jobs")
  [ "$ran" = "$N" ] || { cat "$WORK/$db".p*.log >&2; die "handlers ran $ran times for $N jobs"; }
  [ "$done_n" = "$N" ] && [ "$dead" = 0 ] \
    || die "job check failed: $done_n of $N completed on their first attempt, $dead dead letters"
  # record_tx: its row exists exactly when its job completed, so one per job.
  if [ "$KIND" = record_tx ]; then
    local rows ids row_b
    IFS='|' read -r rows ids row_b < <(sql "$db" -F'|' -c "select count(*), count(distinct job_id) filter (where attempt = 1),
                                                          round(avg(pg_column_size(e.*))) from job_executions e")
    [ "$rows" = "$N" ] && [ "$ids" = "$N" ] \
      || die "job_executions check failed: $rows rows, $ids distinct first-attempt jobs for $N jobs"
    echo "#   job_executions: $rows rows, one per job; ${row_b} B per row (pg_column_size)"
  fi

  local claims claim_ms
  claims=$(sed -n 's/.* ran; \([0-9][0-9]*\) claim(s) took.*/\1/p' "$WORK/$db".p*.log | awk '{ s += $1 } END { print s + 0 }')
  claim_ms=$(sed -n 's/.* job(s), \([0-9.]*\) ms per claim.*/\1/p' "$WORK/$db".p*.log | head -n1)
  grep -h -E '\] \[(warning|error|critical)\]' "$WORK/$db".p*.log | head -n 5 | sed 's/^/#   worker log: /' || true

  local jps busy
  jps=$(fdiv "$N" "$sec" 0)
  read -r b0 tt0 <<<"$mc0"; read -r b1 tt1 <<<"$mc1"
  busy=$(fdiv "$((100 * (b1 - b0)))" "$((tt1 - tt0))" 0)
  echo "# actor-worker c=$conc procs=$procs run=$rep hold=$HOLD: enqueue $N in ${te}s ($(fdiv "$N" "$te" 0) jobs/s);" \
       "drained in ${sec}s ($polls polls); handlers ran $ran times, $done_n jobs completed once, 0 dead letters"
  echo "#   during drain: WAL $(fdiv "$wal" 1000000 1) MB ($(fdiv "$wal" "$N" 0) B/job); commits ~$commits ($(fdiv "$commits" "$N" 3)/job);" \
       "worker-process CPU ${wcpu} s ($(fdiv "$(fdiv "$wcpu" "$sec" 4)" 0.01 0)% of one core); their postgres backends CPU ${bcpu} s;" \
       "machine CPU busy ${busy}% of $(nproc) cores (all processes); load1 at start $load1"
  echo "#   claims: $claims ($(fdiv "$N" "$claims" 0) jobs per claim; ${claim_ms:-?} ms per round trip in the first process)"
  echo "RESULT $LABEL/$cfgname/run$rep jobs_per_sec=$jps jobs=$N seconds=$sec"
  RESULTS+=("$cfgname $jps $sec")

  sql postgres -c "drop database $db with (force)"
}

IFS=, read -r -a CONCS <<<"$CONCURRENCY"
IFS=, read -r -a PROCSS <<<"$PROCS"
CONFIGS=()
for c in "${CONCS[@]}"; do for n in "${PROCSS[@]}"; do CONFIGS+=("$c $n"); done; done
for ((rep = 1; rep <= REPS; rep++)); do
  for cfg in "${CONFIGS[@]}"; do
    # shellcheck disable=SC2086
    one_run $cfg "$rep"
  done
done

echo "# summary (jobs/s per run):"
for cfg in "${CONFIGS[@]}"; do
  read -r c n <<<"$cfg"
  name="c$c/p$n"
  printf '#   %-12s %s\n' "$name:" "$(printf '%s\n' "${RESULTS[@]}" | awk -v k="$name" '$1 == k { printf "%s%s", (s++ ? ", " : ""), $2 }')"
done
read -r c n <<<"${CONFIGS[0]}"
best=$(printf '%s\n' "${RESULTS[@]}" | awk -v k="c$c/p$n" '$1 == k && $2 > b { b = $2; s = $3 } END { print b, s }')
read -r best_jps best_sec <<<"$best"
echo "RESULT $LABEL jobs_per_sec=$best_jps jobs=$N seconds=$best_sec"
