#!/usr/bin/env bash
# bench/reads.sh - what the queries operators run every day cost, with a
# million finished jobs and 100,000 waiting, side by side with
# graphile-worker and pg-boss filled the same way, on one throwaway
# PostgreSQL (initdb defaults: JIT on, two parallel workers per query).
#
#   bench/reads.sh
#   FINISHED=200000 WAITING=20000 bench/reads.sh     # quicker
#
# 1. actor-worker: FINISHED no-op jobs inserted in transactions of
#    TX_JOBS, drained by one worker process (concurrency 64) as in
#    production (lane claims, receipts); then WAITING more, which no worker
#    takes; VACUUM ANALYZE. graphile-worker 0.18 (schema by its CLI) and
#    pg-boss 12.38 (schema by boss.start(), queue `noop`), installed from
#    npm as bench/peers/ installs them, get the same jobs written with SQL:
#    pg-boss keeps its finished jobs (state completed, completed_on set);
#    graphile-worker deletes a job as it completes, so its table holds the
#    waiting ones only.
# 2. Each query below, REPS times, as EXPLAIN (ANALYZE, TIMING OFF): the
#    server's execution time (median) and its planning time (median). One
#    job by id is a prepared statement (a generic plan, as drivers run it)
#    read for IDS different ids; the full scan's rate is its rows over its
#    execution time.
#      states     counts by state            (GROUP BY state)
#      running    how many run now           (state = 'running')
#      available  how many wait in a queue   (state = 'available' AND queue = ...)
#      by_id      one job by id
#      finished   completed in the last hour, of a kind
#      scan       every row, every column
#    graphile-worker has no state column: its states are what its worker
#    reads (locked_at set: running; attempts used up: failed; run_at later:
#    scheduled; else available), and its finished jobs are gone.
#
# Knobs: FINISHED (1000000), WAITING (100000), TX_JOBS (1000), REPS (5),
# IDS (20), PORT (5496), PEERS (1: also graphile-worker and pg-boss),
# BIN, BUILD_DIR, NODE_DIR, GW_VERSION (0.18.0), PGBOSS_VERSION (12.38.0).
# Output: RESULT reads/<system>/<query> exec_ms=.. plan_ms=.. rows=..
# (scan: rows_per_sec=..), then a table with actor-worker's ratios (a ratio
# > 1: actor-worker is faster).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
SCRIPT=reads.sh
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"
FINISHED=${FINISHED:-1000000}
WAITING=${WAITING:-100000}
TX_JOBS=${TX_JOBS:-1000}
REPS=${REPS:-5}
IDS=${IDS:-20}
PORT=${PORT:-5496}
PEERS=${PEERS:-1}
NODE_DIR=${NODE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/actor-worker-bench/node}
GW_VERSION=${GW_VERSION:-0.18.0}
PGBOSS_VERSION=${PGBOSS_VERSION:-12.38.0}

"$ROOT/scripts/install-deps.sh"
bench_build
bench_start_pg
echo "# reads.sh: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores; $(sql postgres -c 'select version()' | cut -d, -f1)"
echo "# settings: $(sql postgres -c "select string_agg(name || '=' || setting, ' ' order by name) from pg_settings
  where name in ('jit', 'jit_above_cost', 'max_parallel_workers_per_gather', 'work_mem', 'shared_buffers')")"

# ---- timing ----------------------------------------------------------------
# median N...: the middle value (the lower of the two middle ones).
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# time_query SYSTEM NAME DB SQL: REPS runs of EXPLAIN ANALYZE; prints the
# RESULT line and sets EXEC (median execution ms).
time_query() {
  local system=$1 name=$2 db=$3 query=$4 out plans=() execs=() rows
  for ((r = 0; r < REPS; r++)); do
    out=$(sql "$db" -c "EXPLAIN (ANALYZE, TIMING OFF, SUMMARY ON) $query")
    plans+=("$(sed -n 's/^Planning Time: \([0-9.]*\) ms$/\1/p' <<<"$out")")
    execs+=("$(sed -n 's/^Execution Time: \([0-9.]*\) ms$/\1/p' <<<"$out")")
    rows=$(head -n1 <<<"$out" | sed -n 's/.*(actual rows=\([0-9]*\).*/\1/p')
  done
  EXEC=$(median "${execs[@]}")
  echo "RESULT reads/$system/$name exec_ms=$EXEC plan_ms=$(median "${plans[@]}") rows=$rows"
}

# time_by_id SYSTEM DB SELECT ID_SQL: the prepared SELECT (with $1) run for
# IDS ids that ID_SQL picks, after the six runs that make its plan generic.
time_by_id() {
  local system=$1 db=$2 query=$3 ids_sql=$4 script id execs=()
  mapfile -t ids < <(sql "$db" -c "$ids_sql")
  [ "${#ids[@]}" -gt 0 ] || die "$system: no ids to read"
  script="PREPARE q AS $query;"
  for ((r = 0; r < 6; r++)); do script+="EXECUTE q('${ids[0]}');"; done
  for id in "${ids[@]}"; do
    script+="EXPLAIN (ANALYZE, TIMING OFF, SUMMARY ON) EXECUTE q('$id');"
  done
  mapfile -t execs < <(sql "$db" -c "$script" | sed -n 's/^Execution Time: \([0-9.]*\) ms$/\1/p')
  EXEC=$(median "${execs[@]}")
  # The same, planned each time (psql, a query written by hand).
  local planned=() out
  for id in "${ids[@]:0:5}"; do
    out=$(sql "$db" -c "EXPLAIN (ANALYZE, TIMING OFF, SUMMARY ON) ${query//\$1/\'$id\'}")
    planned+=("$(sed -n 's/^Planning Time: \([0-9.]*\) ms$/\1/p' <<<"$out")")
  done
  echo "RESULT reads/$system/by_id exec_ms=$EXEC plan_ms=$(median "${planned[@]}") rows=1 prepared=1"
}

declare -A MS
# run_queries SYSTEM DB STATES RUNNING AVAILABLE BY_ID IDS_SQL FINISHED_Q SCAN
run_queries() {
  local system=$1 db=$2
  time_query "$system" states "$db" "$3";    MS[$system/states]=$EXEC
  time_query "$system" running "$db" "$4";   MS[$system/running]=$EXEC
  time_query "$system" available "$db" "$5"; MS[$system/available]=$EXEC
  time_by_id "$system" "$db" "$6" "$7";      MS[$system/by_id]=$EXEC
  time_query "$system" finished "$db" "$8";  MS[$system/finished]=$EXEC
  local rows
  rows=$(sql "$db" -c "SELECT count(*) FROM (${9}) AS s")
  time_query "$system" scan "$db" "$9" >/dev/null
  MS[$system/scan]=$EXEC
  MS[$system/scan_rate]=$(fdiv "$rows" "$(fdiv "$EXEC" 1000 6)" 0)
  echo "RESULT reads/$system/scan exec_ms=$EXEC rows=$rows rows_per_sec=${MS[$system/scan_rate]}"
}

# ---- actor-worker -----------------------------------------------------------
sql postgres -c "create database aw"
URL="postgresql://postgres@127.0.0.1:$PORT/aw"
"$BIN" migrate --database-url "$URL" --log-level warn
fill_started=$(now)
sql aw -c "select 1" >/dev/null
for ((done_ = 0; done_ < FINISHED; done_ += TX_JOBS * 100)); do
  # A hundred transactions of TX_JOBS jobs per psql call.
  script=""
  for ((t = 0; t < 100 && done_ + t * TX_JOBS < FINISHED; t++)); do
    script+="insert into jobs_in (kind, args) select 'noop', jsonb_build_object('n', g)
               from generate_series(1, $TX_JOBS) as g;"
  done
  sql aw -c "$script"
done
CONFIG=$(mktemp /tmp/aw-bench-reads.XXXXXX.toml)
WORKER_LOG=$(mktemp /tmp/aw-bench-reads.XXXXXX.log)
BENCH_CLEANUP+=("rm -f '$CONFIG' '$WORKER_LOG'")
cat >"$CONFIG" <<EOF
[database]
url = "$URL"
[queues.default]
concurrency = 64
EOF
"$BIN" run --config "$CONFIG" --log-level warn >"$WORKER_LOG" 2>&1 &
WORKER=$!
BENCH_CLEANUP+=("kill -KILL $WORKER 2>/dev/null || true")
# Drained when every claimed batch is finished and every job was claimed:
# cheap to ask of job_batches while the worker runs.
until [ "$(sql aw -c "select coalesce(sum(size), 0) >= $FINISHED and bool_and(finished_at is not null)
                       from job_batches where on_lane")" = t ]; do
  kill -0 "$WORKER" 2>/dev/null || { cat "$WORKER_LOG" >&2; die "the worker stopped"; }
  sleep 1
done
kill -TERM "$WORKER"
wait "$WORKER" || true
for ((done_ = 0; done_ < WAITING; done_ += TX_JOBS * 100)); do
  script=""
  for ((t = 0; t < 100 && done_ + t * TX_JOBS < WAITING; t++)); do
    script+="insert into jobs_in (kind, args) select 'noop', jsonb_build_object('n', g)
               from generate_series(1, $TX_JOBS) as g;"
  done
  sql aw -c "$script"
done
sql aw -c "vacuum analyze"
echo "# actor-worker: $FINISHED drained and $WAITING waiting in $(fsub "$(now)" "$fill_started") s;" \
     "jobs by state: $(sql aw -c "select string_agg(state || '=' || n, ' ' order by state)
                                  from (select state, count(*) as n from jobs group by 1) as c")"
run_queries actor-worker aw \
  "SELECT state, count(*) FROM jobs GROUP BY state" \
  "SELECT count(*) FROM jobs WHERE state = 'running'" \
  "SELECT count(*) FROM jobs WHERE state = 'available' AND queue = 'default'" \
  "SELECT * FROM jobs WHERE id = \$1::bigint" \
  "SELECT id FROM jobs_in ORDER BY random() LIMIT $IDS" \
  "SELECT count(*) FROM jobs WHERE finalized_at > now() - interval '1 hour' AND kind = 'noop'" \
  "SELECT * FROM jobs"

# ---- the peers --------------------------------------------------------------
if [ "$PEERS" = 1 ]; then
  command -v node >/dev/null 2>&1 || die "node not found: install nodejs and npm, or set PEERS=0"
  mkdir -p "$NODE_DIR"
  (
    cd "$NODE_DIR"
    pkgver() { node -e "try{console.log(require('./node_modules/$1/package.json').version)}catch(e){console.log('none')}"; }
    exec 9>"$NODE_DIR/.install.lock"
    flock 9
    if [ "$(pkgver graphile-worker)" != "$GW_VERSION" ] || [ "$(pkgver pg-boss)" != "$PGBOSS_VERSION" ]; then
      [ -f package.json ] || echo '{"name":"actor-worker-peer-bench","private":true}' >package.json
      npm install --save-exact --no-audit --no-fund --loglevel=error \
        "graphile-worker@$GW_VERSION" "pg-boss@$PGBOSS_VERSION" >&2 || die "npm install failed"
    fi
  )
  sql postgres -c "create database gw" -c "create database pb"
  "$NODE_DIR/node_modules/.bin/graphile-worker" -c "postgresql://postgres@127.0.0.1:$PORT/gw" \
    --schema-only >/dev/null
  cat >"$NODE_DIR/reads_pgboss_schema.mjs" <<'EOF'
// The pg-boss schema and its queue `noop`, for bench/reads.sh.
import { PgBoss } from "pg-boss";
const boss = new PgBoss({ connectionString: process.argv[2] });
await boss.start();
await boss.createQueue("noop");
await boss.stop({ graceful: false });
EOF
  (cd "$NODE_DIR" && node reads_pgboss_schema.mjs "postgresql://postgres@127.0.0.1:$PORT/pb")
  # graphile-worker: the waiting jobs (its finished ones are deleted).
  sql gw -c "select count(*) from graphile_worker.add_jobs(array(
               select row('noop', jsonb_build_object('n', g), null, null, null, null, null, null)::graphile_worker.job_spec
                 from generate_series(1, $WAITING) as g))" >/dev/null
  # pg-boss: the finished jobs, as its workers leave them, then the waiting ones.
  sql pb -c "insert into pgboss.job (name, data, state, started_on, completed_on)
               select 'noop', jsonb_build_object('n', g), 'completed', now(), now()
                 from generate_series(1, $FINISHED) as g" \
         -c "insert into pgboss.job (name, data)
               select 'noop', jsonb_build_object('n', g) from generate_series(1, $WAITING) as g" \
         -c "vacuum analyze"
  sql gw -c "vacuum analyze"
  GW_STATE="CASE WHEN locked_at IS NOT NULL THEN 'running' WHEN attempts >= max_attempts THEN 'failed'
                 WHEN run_at > now() THEN 'scheduled' ELSE 'available' END"
  run_queries graphile-worker gw \
    "SELECT $GW_STATE AS state, count(*) FROM graphile_worker.jobs GROUP BY 1" \
    "SELECT count(*) FROM graphile_worker.jobs WHERE locked_at IS NOT NULL" \
    "SELECT count(*) FROM graphile_worker.jobs WHERE locked_at IS NULL AND run_at <= now()
       AND attempts < max_attempts AND task_identifier = 'noop'" \
    "SELECT * FROM graphile_worker.jobs WHERE id = \$1::bigint" \
    "SELECT id FROM graphile_worker.jobs ORDER BY random() LIMIT $IDS" \
    "SELECT count(*) FROM graphile_worker.jobs WHERE updated_at > now() - interval '1 hour'
       AND locked_at IS NULL AND attempts > 0 AND task_identifier = 'noop'" \
    "SELECT * FROM graphile_worker.jobs"
  run_queries pg-boss pb \
    "SELECT state, count(*) FROM pgboss.job GROUP BY state" \
    "SELECT count(*) FROM pgboss.job WHERE state = 'active'" \
    "SELECT count(*) FROM pgboss.job WHERE state = 'created' AND name = 'noop'" \
    "SELECT * FROM pgboss.job WHERE id = \$1::uuid" \
    "SELECT id FROM pgboss.job ORDER BY random() LIMIT $IDS" \
    "SELECT count(*) FROM pgboss.job WHERE completed_on > now() - interval '1 hour' AND name = 'noop'" \
    "SELECT * FROM pgboss.job"
fi

# ---- the table ----------------------------------------------------------------
echo
echo "| query | target | actor-worker | graphile-worker | pg-boss | ÷ graphile-worker | ÷ pg-boss |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: |"
row() {
  local q=$1 target=$2 unit=${3:-ms} a g p
  a=${MS[actor-worker/$q]:-}; g=${MS[graphile-worker/$q]:-}; p=${MS[pg-boss/$q]:-}
  if [ "$unit" = rows/s ]; then
    echo "| $q | $target | $a | ${g:--} | ${p:--} | ${g:+$(fdiv "$a" "$g" 2)} | ${p:+$(fdiv "$a" "$p" 2)} |"
  else
    echo "| $q | $target | $a ms | ${g:+$g ms} | ${p:+$p ms} | ${g:+$(fdiv "$g" "$a" 2)} | ${p:+$(fdiv "$p" "$a" 2)} |"
  fi
}
row states "≤ 1,000 ms"
row running "≤ 50 ms"
row available "≤ 50 ms"
row by_id "≤ 1 ms"
row finished "≤ 1,000 ms"
row scan_rate "≥ 1,000,000 rows/s" rows/s
