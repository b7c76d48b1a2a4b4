#!/usr/bin/env bash
# bench/history.sh - what a worker and its leader cost once the current
# ring slot holds a big finished history (a slot stays current for up to
# 6 hours: a queue doing 100 jobs/s leaves 2 million jobs in it). Every
# statement they send should be bounded by the live work, never by the
# finished jobs; this finds the ones that are not.
#
#   1. seed: LANE_N noop jobs on the lanes, ROW_N keyed jobs (off the
#      lanes: one row claim per few jobs, each a row batch) and ROW_N
#      jobs in a second queue, half of them inserted as `scheduled`;
#      drained by one worker process (concurrency 64 and 10) that leads
#      the cluster, with heartbeats, maintenance and queue samples every
#      2 s (the metrics' sampler is on: [http] listens). Then BATCH_N
#      finished row batches of that worker, claimed an hour ago, written
#      straight into job_batches: what six hours of small row claims
#      (retries, scheduled and keyed jobs) leave in the slot. ANALYZE,
#      and up to 60 s for the worker's heartbeat to have looked at them
#      (once: each is marked finished), then VACUUM of job_batches.
#   2. with all of that finished in the slot, SECONDS_ seconds of a trickle
#      (20 lane jobs and one keyed job every 2 s) while the worker runs on;
#      pg_stat_statements (track = all: nested statements of the SQL
#      functions too) counts every statement of the database.
#   3. the statements by their slowest run: calls, mean and max ms, and
#      those over LIMIT_MS at their slowest (a heartbeat, a rescue, a
#      sample or a claim that reads the finished history takes from tens of
#      milliseconds to seconds here).
#
#   bench/history.sh
#   LANE_N=200000 bench/history.sh               # quicker
#
# Knobs: LANE_N (1000000), ROW_N (50000), BATCH_N (200000), SECONDS_ (60),
# LIMIT_MS (50),
# TOP (30), PORT (5498), HTTP_PORT (5499), PGDIR, BIN, BUILD_DIR.
# Output: RESULT history/statement calls=.. mean_ms=.. max_ms=.. sql=..
# (TOP lines, slowest first), then RESULT history/over_limit count=..
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
SCRIPT=history.sh
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"
LANE_N=${LANE_N:-1000000}
ROW_N=${ROW_N:-50000}
BATCH_N=${BATCH_N:-200000}
SECONDS_=${SECONDS_:-60}
LIMIT_MS=${LIMIT_MS:-50}
TOP=${TOP:-30}
PORT=${PORT:-5498}
HTTP_PORT=${HTTP_PORT:-5499}

"$ROOT/scripts/install-deps.sh"
bench_build
bench_start_pg
# pg_stat_statements is loaded at server start.
sql postgres -c "alter system set shared_preload_libraries = 'pg_stat_statements'"
"$ROOT/scripts/pg.sh" stop "$PGDIR" >/dev/null
"$ROOT/scripts/pg.sh" start "$PGDIR" "$PORT" >/dev/null
sql postgres -c "alter system set pg_stat_statements.track = 'all'" -c "select pg_reload_conf()" >/dev/null
echo "# history.sh: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores; $(sql postgres -c 'select version()' | cut -d, -f1)"
sql postgres -c "create database history"
URL="postgresql://postgres@127.0.0.1:$PORT/history"
"$BIN" migrate --database-url "$URL" --log-level warn
sql history -c "create extension pg_stat_statements"

CONFIG=$(mktemp /tmp/aw-bench-history.XXXXXX.toml)
BENCH_CLEANUP+=("rm -f '$CONFIG'")
cat >"$CONFIG" <<EOF
[database]
url = "$URL"
[worker]
heartbeat_interval = "2s"
maintenance_interval = "2s"
reclaim_window = "6s"
[metrics]
queue_stats_interval = "2s"
[http]
listen = "127.0.0.1:$HTTP_PORT"
[queues.default]
concurrency = 64
[queues.other]
concurrency = 10
EOF

# 1. The history.
for ((done_ = 0; done_ < LANE_N; done_ += 100000)); do
  n=$((LANE_N - done_ < 100000 ? LANE_N - done_ : 100000))
  sql history -c "insert into jobs_in (kind, args) select 'noop', jsonb_build_object('n', g)
                  from generate_series(1, $n) as g"
done
sql history -c "insert into jobs_in (kind, ordering_key) select 'noop', 'k' || (g % 5000)
                from generate_series(1, $ROW_N) as g"
sql history -c "insert into jobs_in (kind, queue, state) select 'noop', 'other',
                case when g % 2 = 0 then 'scheduled' else 'available' end
                from generate_series(1, $ROW_N) as g"
WORKER_LOG=$(mktemp /tmp/aw-bench-history.XXXXXX.log)
BENCH_CLEANUP+=("rm -f '$WORKER_LOG'")
"$BIN" run --config "$CONFIG" --log-level warn >"$WORKER_LOG" 2>&1 &
WORKER=$!
BENCH_CLEANUP+=("kill -KILL $WORKER 2>/dev/null || true")
start=$(now)
until [ "$(sql history -c "select count(*) from jobs_live where state not in ('completed', 'cancelled')")" = 0 ]; do
  kill -0 "$WORKER" 2>/dev/null || { cat "$WORKER_LOG" >&2; die "the worker stopped"; }
  sleep 2
done
echo "# drained $((LANE_N + 2 * ROW_N)) jobs in $(fsub "$(now)" "$start") s; in the current slot: $(sql history -c "select count(*) from jobs") jobs, $(sql history -c "select count(*) from job_batches") batches"
worker_id=$(sql history -c "select worker_id from worker_nodes where left_at is null limit 1")
[ -n "$worker_id" ] || die "the worker has no row in worker_nodes"
sql history -v worker="$worker_id" <<EOF
insert into job_batches (id, queue, priority, worker, on_lane, size, claimed_at)
  select actor_worker_batch_id(false), 'other', 0, :'worker', false, 1, now() - interval '1 hour'
    from generate_series(1, $BATCH_N);
EOF
sql history -c "analyze"
# The worker's next heartbeat looks at each of them once and marks it
# finished (about 10 s for 200,000, once); the statistics start after.
start=$(now)
for ((t = 0; t < 60; t++)); do
  open_=$(sql history -v worker="$worker_id" <<EOF
select count(*) from job_batches
 where worker = :'worker' and finished_at is null and rescued_at is null;
EOF
)
  [ "$open_" -lt 1000 ] && break
  sleep 1
done
echo "# $BATCH_N finished row batches seeded; $open_ still open $(fsub "$(now)" "$start") s later"
# Marking them all at once left as many dead tuples, which autovacuum
# clears in its own time; the steady state has them cleared.
sql history -c "vacuum analyze job_batches"

# 2. Running on top of it.
sql history -c "select pg_stat_statements_reset()" >/dev/null
for ((t = 0; t < SECONDS_; t += 2)); do
  sql history -c "insert into jobs_in (kind) select 'noop' from generate_series(1, 20)" \
    -c "insert into jobs_in (kind, queue, ordering_key) values ('noop', 'other', 'trickle$t')"
  sleep 2
done
kill -TERM "$WORKER"
wait "$WORKER" || true

# 3. The statements, slowest first (the reset and the bench's own inserts
# and counts left out).
sql history -F ' ' -c "
  select 'RESULT history/statement', 'calls=' || calls,
         'mean_ms=' || round(mean_exec_time::numeric, 2),
         'max_ms=' || round(max_exec_time::numeric, 2),
         'sql=' || left(regexp_replace(regexp_replace(query, '--[^\n]*', '', 'g'),
                                       '\s+', ' ', 'g'), 120)
    from pg_stat_statements
   where dbid = (select oid from pg_database where datname = 'history')
     and query not like '%pg_stat_statements%'
     and query not like 'insert into jobs_in (kind%'
   order by max_exec_time desc
   limit $TOP"
over=$(sql history -c "
  select count(*) from pg_stat_statements
   where dbid = (select oid from pg_database where datname = 'history')
     and query not like '%pg_stat_statements%'
     and query not like 'insert into jobs_in (kind%'
     and max_exec_time > $LIMIT_MS")
echo "RESULT history/over_limit limit_ms=$LIMIT_MS count=$over"
