#!/usr/bin/env bash
# bench/dashboard.sh - the dashboard's API on a big table: every page's
# answer time with 1,000,000 jobs and 100,000 dead letters (issue 11's
# target: under 200 ms each), on a throwaway PostgreSQL with initdb
# defaults.
#
#   1. seed: LANE_N noop jobs enqueued through `jobs` and drained by a real
#      worker (concurrency 64, completed_retention 30d: the completed lane
#      jobs, claim batches and receipts stay, as in production), then rows
#      written straight through `jobs`: OFFLANE_N completed jobs off the
#      lanes (as retried, scheduled or ordered jobs finish), CANCELLED_N
#      cancelled, SCHEDULED_N scheduled, BACKLOG_N available in a queue
#      nobody serves, a few waiting for a callback and a rare kind spread
#      over the whole table; up to TOTAL_N jobs in all; DEAD_N dead letters
#      of about 60 causes (kind x error template) spread over 30 days.
#      VACUUM ANALYZE. A worker with [http] and the dashboard then starts
#      with RUNNING_N long jobs running.
#   2. every GET endpoint of the API (and the page's files) REQS times
#      after WARMUP requests, with curl from this host: median and max of
#      the total time, the status and the answer's size.
#   3. one bulk action, timed once: retry a failure group.
#   4. EXPLAIN (ANALYZE, TIMING OFF) of the statements that the indexes of
#      migrations/011_dashboard.sql serve, with the index and without it
#      (dropped inside a transaction that rolls back).
#
#   bench/dashboard.sh
#   BIN=build/actor-worker bench/dashboard.sh      # skip the Release build
#
# Knobs: TOTAL_N (1000000), LANE_N (860000), OFFLANE_N (100000),
# CANCELLED_N (10000), SCHEDULED_N (5000), BACKLOG_N (20000), DEAD_N
# (100000), RUNNING_N (20), REQS (20), WARMUP (3), PORT (5496), HTTP_PORT
# (5497), PGDIR, BIN, BUILD_DIR, OUT (also write the output there).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
SCRIPT=dashboard.sh
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"
TOTAL_N=${TOTAL_N:-1000000}
LANE_N=${LANE_N:-860000}
OFFLANE_N=${OFFLANE_N:-100000}
CANCELLED_N=${CANCELLED_N:-10000}
SCHEDULED_N=${SCHEDULED_N:-5000}
BACKLOG_N=${BACKLOG_N:-20000}
DEAD_N=${DEAD_N:-100000}
RUNNING_N=${RUNNING_N:-20}
REQS=${REQS:-20}
WARMUP=${WARMUP:-3}
PORT=${PORT:-5496}
HTTP_PORT=${HTTP_PORT:-5497}
TOKEN=bench-dashboard-token-0123456789
if [ -n "${OUT:-}" ]; then
  exec > >(tee "$OUT") 2>&1
fi

"$ROOT/scripts/install-deps.sh"
bench_build
bench_start_pg
DB=dashboard
URL="postgresql://postgres@127.0.0.1:$PORT/$DB"
WORK=$(mktemp -d /tmp/aw-bench-dashboard.XXXXXX)
BENCH_CLEANUP+=("rm -rf '$WORK'")
echo "# dashboard.sh: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(sql postgres -c 'select version()' | cut -d, -f1)"
echo "# binary: $BIN ($("$BIN" --version 2>/dev/null || true))"
sql postgres -c "create database $DB"
"$BIN" migrate --database-url "$URL" --log-level warn

# -- 1. seed ---------------------------------------------------------------------
t0=$(now)
for ((done_n = 0; done_n < LANE_N; done_n += 100000)); do
  n=$((LANE_N - done_n < 100000 ? LANE_N - done_n : 100000))
  sql $DB -c "insert into jobs_in (kind, args) select 'noop', jsonb_build_object('n', g, 'to', 'user' || g || '@example.com') from generate_series(1, $n) as g"
done
echo "# enqueued $LANE_N lane jobs in $(fsub "$(now)" "$t0") s; draining them with a worker"
cat >"$WORK/drain.toml" <<EOF
[worker]
completed_retention = "30d"
[queues.default]
concurrency = 64
[http]
listen = "127.0.0.1:$HTTP_PORT"
dashboard = false
[metrics]
queue_stats_interval = "1s"
EOF
t0=$(now)
"$BIN" --config "$WORK/drain.toml" --database-url "$URL" --log-level warn run >"$WORK/drain.log" 2>&1 &
DRAIN_PID=$!
BENCH_CLEANUP+=("kill $DRAIN_PID 2>/dev/null || true")
metric() {  # metric SERIES: its value on the endpoint, or -1
  { curl -s "http://127.0.0.1:$HTTP_PORT/metrics" || true; } | gawk -v s="$1" 'index($0, s " ") == 1 { print $2; found = 1 } END { if (!found) print -1 }'
}
while :; do
  c=$(metric 'actor_worker_job_executions_total{kind="noop",outcome="completed",queue="default"}')
  [ "${c%.*}" -ge "$LANE_N" ] 2>/dev/null && break
  kill -0 "$DRAIN_PID" 2>/dev/null || die "the drain worker stopped: $(tail -5 "$WORK/drain.log")"
  sleep 2
done
kill -TERM "$DRAIN_PID"; wait "$DRAIN_PID" || true
echo "# drained in $(fsub "$(now)" "$t0") s"

t0=$(now)
sql $DB <<EOF
-- Finished off the lanes: jobs that were scheduled, retried, ordered or
-- unique when they ran.
insert into jobs_in (kind, queue, args, state, run_at, created_at, attempt,
                  error_count, last_error_message, finalized_at)
select (array['send_email', 'charge', 'report', 'sync_user', 'webhook'])[1 + g % 5],
       (array['default', 'mail', 'billing'])[1 + g % 3],
       jsonb_build_object('n', g), 'completed',
       now() - make_interval(secs => g % 86400), now() - make_interval(secs => g % 86400 + 5),
       1 + g % 3, g % 3, case when g % 3 > 0 then 'upstream 503, retried' end,
       now() - make_interval(secs => g % 86400 - 1)
  from generate_series(1, $OFFLANE_N) as g;
insert into jobs_in (kind, queue, state, finalized_at, last_error_message)
select 'report', 'billing', 'cancelled', now(), 'cancelled by an operator'
  from generate_series(1, $CANCELLED_N);
insert into jobs_in (kind, queue, state, run_at)
select 'report', 'billing', 'scheduled', now() + make_interval(mins => 10 + g % 1000)
  from generate_series(1, $SCHEDULED_N) as g;
insert into jobs_in (kind, queue, args)
select 'noop', 'backlog', jsonb_build_object('n', g) from generate_series(1, $BACKLOG_N) as g;
insert into jobs_in (kind, queue, state, callback_id, callback_timeout_at)
select 'await_callback', 'default', 'waiting_external', gen_random_uuid(), now() + interval '1 day'
  from generate_series(1, 50);
EOF
have=$(sql $DB -c "select count(*) from job_rows")
rest=$((TOTAL_N - have - RUNNING_N))
if [ "$rest" -gt 0 ]; then
  # The rest: finished jobs of a rare kind, one in 500 of them.
  sql $DB -c "insert into jobs_in (kind, queue, state, finalized_at) select case when g % 500 = 0 then 'rare_kind' else 'report' end, 'mail', 'completed', now() from generate_series(1, $rest) as g"
fi
sql $DB <<EOF
insert into dead_letter_jobs (original_job_id, kind, queue, args, priority,
                              attempt, max_attempts, error_count,
                              last_error_message, created_at, failed_at)
select 2000000000 + g, k.kind, k.queue,
       jsonb_build_object('n', g, 'customer', 'c' || (g % 977)),
       0, 3, 3, 3,
       case (g / 7) % 6
         when 0 then 'payment ' || g || ' declined by ''gateway-' || (g % 7) || ''''
         when 1 then 'SMTP timeout after ' || (g % 30) || 's talking to 10.0.' || (g % 255) || '.' || (g % 100)
         when 2 then 'user ' || gen_random_uuid() || ' not found'
         when 3 then 'HTTP 503 from https://api.example.com/v' || (g % 3) || '/orders/' || g
         when 4 then 'deadline exceeded at ' || (now() - make_interval(secs => g))::text
         else 'unexpected error code ' || (g % 500) || ' in worker ' || md5(g::text)
       end,
       now() - make_interval(days => 30) + make_interval(secs => g * 25),
       now() - make_interval(days => 30) + make_interval(secs => g * 25 + 60)
  from generate_series(1, $DEAD_N) as g,
       lateral (select (array['charge', 'send_email', 'sync_user', 'webhook', 'report',
                              'export', 'import', 'resize_image', 'notify', 'billing_run'])[1 + g % 10] as kind,
                       (array['default', 'mail', 'billing'])[1 + g % 3] as queue) as k;
EOF
sql $DB -c "vacuum analyze"
echo "# seeded in $(fsub "$(now)" "$t0") s: $(sql $DB -c "select count(*) from job_rows") job rows, $(sql $DB -c "select count(*) from dead_letter_jobs") dead letters"
sql $DB -c "select '#   ' || state || ': ' || count(*) from jobs group by state order by 1"
sql $DB -c "select '#   table sizes: job_rows ' || pg_size_pretty(pg_total_relation_size('job_rows')) || ', dead_letter_jobs ' || pg_size_pretty(pg_total_relation_size('dead_letter_jobs')) || ', claim_batches ' || (select count(*) from claim_batches) || ' rows, batch_completions ' || (select count(*) from batch_completions) || ' rows'"

# The worker the pages are asked of, with long jobs running.
sql $DB -c "insert into jobs_in (kind, args) select 'sleep', '{\"ms\": 3600000}' from generate_series(1, $RUNNING_N)"
cat >"$WORK/dash.toml" <<EOF
[worker]
completed_retention = "30d"
[queues.default]
concurrency = $((RUNNING_N + 10))
[http]
listen = "127.0.0.1:$HTTP_PORT"
token = "$TOKEN"
[metrics]
queue_stats_interval = "5s"
EOF
"$BIN" --config "$WORK/dash.toml" --database-url "$URL" --log-level warn run >"$WORK/dash.log" 2>&1 &
DASH_PID=$!
BENCH_CLEANUP+=("kill $DASH_PID 2>/dev/null || true")
for _ in $(seq 1 120); do
  r=$(metric 'actor_worker_jobs_running{queue="default"}')
  [ "${r%.*}" -ge "$RUNNING_N" ] 2>/dev/null && [ "$(metric 'actor_worker_queue_jobs{queue="backlog",state="available"}')" != "-1" ] && break
  sleep 1
done
echo "# worker with the dashboard up; $(metric 'actor_worker_jobs_running{queue="default"}') jobs running"

# -- 2. time every endpoint ---------------------------------------------------------
B="http://127.0.0.1:$HTTP_PORT"
ids() { sql $DB -c "$1"; }
lane_done=$(ids "select id from job_rows where ready_xid is not null and kind = 'noop' and queue = 'default' order by id limit 1 offset $((LANE_N / 2))")
mid=$(ids "select id from job_rows order by id limit 1 offset $((TOTAL_N / 2))")
dead_job=$(ids "select original_job_id from dead_letter_jobs order by id limit 1 offset $((DEAD_N / 2))")
dead_id=$(ids "select id from dead_letter_jobs order by id limit 1 offset $((DEAD_N / 2))")
fp=$(ids "select fingerprint from dead_letter_jobs where kind = 'charge' group by fingerprint order by count(*) desc limit 1")
fp_q=$(gawk -v s="$fp" 'BEGIN { for (i = 1; i <= length(s); i++) { c = substr(s, i, 1); if (c ~ /[A-Za-z0-9._~-]/) o = o c; else o = o sprintf("%%%02X", ord(c)) } print o }
  function ord(c,  i) { for (i = 0; i < 256; i++) if (sprintf("%c", i) == c) return i }')

printf '%-58s %6s %9s %9s %9s\n' "GET" status median_ms max_ms bytes
time_path() {  # time_path PATH
  local path=$1 i line status
  for ((i = 0; i < WARMUP; i++)); do curl -s -o /dev/null "$B$path"; done
  : >"$WORK/times"
  for ((i = 0; i < REQS; i++)); do
    line=$(curl -s -o "$WORK/body" -w '%{http_code} %{time_total} %{size_download}' "$B$path")
    echo "$line" >>"$WORK/times"
  done
  status=$(cut -d' ' -f1 "$WORK/times" | sort -u | tr '\n' ',' | sed 's/,$//')
  gawk -v p="$path" -v st="$status" '
    { t[NR] = $2 * 1000; b = $3 }
    END {
      n = asort(t)
      med = (n % 2) ? t[(n + 1) / 2] : (t[n / 2] + t[n / 2 + 1]) / 2
      printf "%-58s %6s %9.1f %9.1f %9d\n", (length(p) > 58 ? substr(p, 1, 55) "..." : p), st, med, t[n], b
    }' "$WORK/times"
  echo "$path" >>"$WORK/paths"
}
for path in \
  / /app.js /vendor/chart.min.js \
  /api/session /api/overview /api/nodes /api/schedules \
  "/api/jobs" "/api/jobs?before=$mid" \
  "/api/jobs?state=completed" "/api/jobs?state=completed&before=$mid" \
  "/api/jobs?state=available" "/api/jobs?state=available&queue=backlog" \
  "/api/jobs?state=running" "/api/jobs?state=scheduled" "/api/jobs?state=waiting_external" \
  "/api/jobs?state=cancelled" \
  "/api/jobs?queue=billing" "/api/jobs?kind=rare_kind" "/api/jobs?kind=no_such_kind" \
  "/api/jobs?state=completed&kind=rare_kind" "/api/jobs?state=running&kind=no_such_kind" \
  "/api/jobs/$lane_done" "/api/jobs/$dead_job" \
  "/api/dead-letters" "/api/dead-letters?before=$dead_id" "/api/dead-letters?queue=mail" \
  "/api/dead-letters?kind=charge" "/api/dead-letters?kind=charge&fingerprint=$fp_q" \
  "/api/dead-letters/$dead_id" \
  "/api/dead-letters/count?kind=charge&fingerprint=$fp_q" "/api/dead-letters/count" \
  "/api/failures" "/api/audit"; do
  time_path "$path"
done
echo "# ($REQS requests each after $WARMUP warm-up, one at a time, curl from this host; the page's file sizes are uncompressed)"
# What the filtered pages said about their scan.
for path in "/api/jobs?kind=rare_kind" "/api/jobs?kind=no_such_kind" "/api/dead-letters?kind=charge"; do
  curl -s "$B$path" | gawk -v p="$path" '{ n = gsub(/[{,] ?"id" ?: ?/, "&"); match($0, /"next_before":[^,]*,"partial":[a-z]*/); print "#   " p ": " n " rows, " substr($0, RSTART, RLENGTH) }'
done

# -- 3. one bulk action ---------------------------------------------------------------
count=$(curl -s "$B/api/dead-letters/count?kind=charge&fingerprint=$fp_q" | sed 's/[^0-9]//g')
t0=$(now)
answer=$(curl -s -X POST -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
  --data "{\"kind\":\"charge\",\"fingerprint\":$(printf '%s' "$fp" | gawk '{ gsub(/\\/, "\\\\"); gsub(/"/, "\\\""); printf "\"%s\"", $0 }')}" \
  "$B/api/dead-letters/retry")
echo "POST /api/dead-letters/retry (group kind=charge, \"$fp\": $count dead letters): $(fsub "$(now)" "$t0") s -> $(echo "$answer" | head -c 60)..."
sql $DB -c "select '#   audit_log: ' || action || ' affected ' || affected || ', ' || cardinality(job_ids) || ' job ids kept' from audit_log"

# -- 4. the indexes of migration 011: with and without ----------------------------------
explain() {  # explain LABEL INDEX SQL: execution time with the index, then without
  local with without
  with=$(sql $DB -c "explain (analyze, timing off, format json) $3" | gawk 'match($0, /"Execution Time": [0-9.]+/) { print substr($0, RSTART + 18, RLENGTH - 18) }')
  without=$(sql $DB <<EOF | gawk 'match($0, /"Execution Time": [0-9.]+/) { print substr($0, RSTART + 18, RLENGTH - 18) }'
begin;
drop index $2;
explain (analyze, timing off, format json) $3;
rollback;
EOF
)
  printf '#   %-52s with %-28s %8.1f ms, without %8.1f ms\n' "$1" "$2" "$with" "$without"
}
echo "# EXPLAIN ANALYZE, execution time of the statements migration 011's indexes serve:"
explain "jobs list, state=cancelled, newest 50" job_rows_finished_idx \
  "select id from job_rows where state = 'cancelled' and ready_xid is null order by id desc limit 50"
explain "jobs list, state=completed off the lanes, newest 50" job_rows_finished_idx \
  "select id from job_rows where state = 'completed' and ready_xid is null order by id desc limit 50"
explain "failure groups (storage/sql/dashboard.sql:dashboard_failure_groups)" dead_letter_jobs_fingerprint_idx \
  "$(awk '/^-- name: /{p = ($3 == "dashboard_failure_groups"); next} p && !/^--/' \
       "$ROOT/storage/sql/dashboard.sql" | sed 's/\$1/100/')"
explain "one group's dead letters, newest 50" dead_letter_jobs_fingerprint_idx \
  "select id from dead_letter_jobs where kind = 'sync_user' and fingerprint = 'user <uuid> not found' order by id desc limit 50"
explain "one group's count (before retrying it)" dead_letter_jobs_fingerprint_idx \
  "select count(*) from dead_letter_jobs where kind = 'sync_user' and fingerprint = 'user <uuid> not found'"

kill -TERM "$DASH_PID"; wait "$DASH_PID" || true
