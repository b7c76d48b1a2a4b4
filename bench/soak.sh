#!/usr/bin/env bash
# bench/soak.sh - throughput and table health over a long run: a producer
# enqueues at 70% of the measured drain rate while one worker works, for
# MINUTES minutes, on a throwaway PostgreSQL with default settings.
#
#   bench/soak.sh                       # 30 minutes (about 35 with the setup)
#   MINUTES=5 bench/soak.sh             # a quick look
#   RATE=20000 bench/soak.sh            # a fixed enqueue rate (jobs/s)
#   HOLD=0 bench/soak.sh                # clear weather all the way
#
# Steps: fresh database -> `actor-worker migrate` -> DRAIN_N no-op jobs in
# one INSERT -> one `actor-worker run` (shipped defaults apart from
# CONCURRENCY and completed_retention) drains them: the drain rate -> pgbench
# inserts BATCH jobs per transaction into `jobs` at 70% of it (RATE
# overrides) for MINUTES minutes while the same worker keeps working -> the
# backlog drains -> SIGTERM -> every job ran exactly once.
#
# The weather: from minute HOLD_FROM (5) to minute HOLD_UNTIL (20) a
# session holds a transaction id open (BEGIN; SELECT txid_current(); and
# nothing else, as an idle-in-transaction client or a long migration does):
# HOLD=same (the default) in the queue's own database, HOLD=1 in another
# database of the server, HOLD=0 never.
#
# Every SAMPLE_S seconds (60) the script samples the queue tables: live and
# dead tuples of jobs (summed over its partitions), job_batches and
# batch_receipts (pg_stat_user_tables), the size of jobs with its indexes,
# the backlog (jobs due and not handed out: lane jobs past their lane's
# position, and available rows off the lanes), vacuums of jobs so far, and
# the ring's current slot (docs/storage.md: a slot is emptied by TRUNCATE
# once past the retention). The worker logs every 10 s how many jobs
# completed and its claim round trips (p50, p99); the table puts both per
# minute beside the samples, and what the producer inserted that minute
# (pgbench's progress), which completions can only follow.
#
# Retention: RETENTION ("5m") is the worker's completed_retention. With the
# default 24h nothing would be retired during the soak: the tables would
# only grow, and retention would not be part of the test. Five minutes
# reaches the steady state (enqueue = complete = retire) after the first
# minutes (a slot goes at most a quarter of the retention late).
#
# The checks, printed at the end (exit status 1 if one fails):
#   - every job ran exactly once, no dead letters;
#   - throughput of the last 5 minutes >= 90% of the first 5;
#   - dead tuples of jobs stay under DEAD_BOUND (default: 25% of the rows
#     retention keeps, RATE x retention, plus the default vacuum
#     threshold), and of job_batches and batch_receipts under 100,000;
#   - claim latency p99 (median of the worker's 10 s windows) of the last 5
#     minutes is at most 1.5 x that of the first 5 plus 2 ms.
#
# Knobs: MINUTES (30), RATE (70% of the drain), DRAIN_N (200000), BATCH
# (100 jobs per producer transaction), PRODUCERS (2 pgbench clients),
# HOLD (same), HOLD_FROM (5), HOLD_UNTIL (20),
# CONCURRENCY (10, the shipped default), RETENTION (5m), SAMPLE_S (60),
# DEAD_BOUND, PORT (5499), PGDIR, BIN / BUILD_DIR (as in run.sh), OUT (a
# copy of the output).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
SCRIPT=soak.sh
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"

MINUTES=${MINUTES:-30}
DRAIN_N=${DRAIN_N:-200000}
BATCH=${BATCH:-100}
PRODUCERS=${PRODUCERS:-2}
CONCURRENCY=${CONCURRENCY:-10}
RETENTION=${RETENTION:-5m}
SAMPLE_S=${SAMPLE_S:-60}
PORT=${PORT:-5499}
HOLD=${HOLD:-same}
HOLD_FROM=${HOLD_FROM:-5}
HOLD_UNTIL=${HOLD_UNTIL:-20}
case "$HOLD" in 0|1|same) ;; *) die "HOLD is 0, 1 or same, not '$HOLD'" ;; esac

"$ROOT/scripts/install-deps.sh"   # also gawk, and pgbench (postgresql)
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)
PGBENCH=$(command -v pgbench || echo "$PGBIN/pgbench")
[ -x "$PGBENCH" ] || die "pgbench not found (Debian: postgresql-15 ships it in $PGBIN)"
bench_build
WORK=$(mktemp -d /tmp/aw-soak.XXXXXX)
WORKER_PID=""
PGBENCH_PID=""
BENCH_CLEANUP+=('[ -n "${KEEP_LOGS:-}" ] || rm -rf "$WORK"')
bench_start_pg
BENCH_CLEANUP+=('[ -z "$WORKER_PID" ] || kill -KILL "$WORKER_PID" 2>/dev/null || true'
                '[ -z "$PGBENCH_PID" ] || kill -KILL "$PGBENCH_PID" 2>/dev/null || true')
[ -z "${OUT:-}" ] || exec > >(tee "$OUT") 2>&1

DB=awsoak
URL="postgresql://postgres@127.0.0.1:$PORT/$DB"
sql postgres -c "create database $DB"
"$BIN" migrate --database-url "$URL" --log-level warn
echo "# soak.sh: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores; $(sql postgres -c 'select version()' | cut -d, -f1)"
echo "# worker: $BIN; concurrency $CONCURRENCY; completed_retention $RETENTION; otherwise shipped defaults"
[ "$HOLD" = 0 ] || echo "# weather: a transaction id held open from minute $HOLD_FROM to minute $HOLD_UNTIL ($([ "$HOLD" = same ] && echo "in the queue's own database" || echo "in another database"))"

# The jobs due and waiting for a worker, as `jobs` says (its available
# branches read only the jobs not handed out: docs/storage.md).
BACKLOG_SQL="select count(*) from jobs where state = 'available'"
# Anything left? A job not finished.
LEFT_SQL="select exists(select 1 from jobs
                         where state in ('available', 'scheduled', 'running', 'waiting_external'))"
# The first drain, counted cheaply (as run.sh does: receipts of lane
# completions, finished rows, dead letters; retention has not begun yet).
FIRST_LEFT_SQL="select (select coalesce(sum(bit_count(mask::bit(64))), 0) from batch_receipts where done)
  + (select count(*) from jobs_in where ready_xid = '0' and state in ('completed', 'cancelled'))
  + (select count(*) from dead_letter_jobs) < $DRAIN_N"
wait_drained() {
  local limit=$1 left_sql=$2 pause=$3 t0
  t0=$(now)
  while [ "$(sql "$DB" -c "$left_sql")" = t ]; do
    kill -0 "$WORKER_PID" 2>/dev/null || { tail -n 20 "$WORK/worker.log" >&2; die "the worker exited"; }
    [ "$(fsub "$(now)" "$t0" | cut -d. -f1)" -lt "$limit" ] || die "not drained after $limit s"
    sleep "$pause"
  done
}

cat >"$WORK/worker.toml" <<EOF
[database]
url = "$URL"

[worker]
node = "soak"
completed_retention = "$RETENTION"

[queues.default]
concurrency = $CONCURRENCY
EOF

# ---- the drain: its rate sets the producer's ----------------------------------------------------
sql "$DB" -c "insert into jobs_in (kind, args)
              select 'noop', jsonb_build_object('n', i) from generate_series(1, $DRAIN_N) as i"
sql "$DB" -c "analyze" -c "checkpoint"
T0=$(now)
"$BIN" run --config "$WORK/worker.toml" 2>"$WORK/worker.log" &
WORKER_PID=$!
wait_drained 600 "$FIRST_LEFT_SQL" 0.02
DRAIN_S=$(fsub "$(now)" "$T0")
DRAIN_RATE=$(fdiv "$DRAIN_N" "$DRAIN_S" 0)
RATE=${RATE:-$(fdiv "$((DRAIN_RATE * 7))" 10 0)}
TPS=$(fdiv "$RATE" "$BATCH" 1)
HOW="into jobs"
echo "# drain: $DRAIN_N jobs in ${DRAIN_S}s = $DRAIN_RATE jobs/s; the producer enqueues $RATE jobs/s" \
     "($TPS transactions/s of $BATCH jobs $HOW, $PRODUCERS pgbench clients) for $MINUTES min"

# ---- the soak -----------------------------------------------------------------------------------
cat >"$WORK/enqueue.sql" <<EOF
insert into jobs_in (kind, args) select 'noop', jsonb_build_object('n', g) from generate_series(1, $BATCH) as g;
EOF
DURATION=$((MINUTES * 60))
SOAK_START=$(now)
SOAK_START_WALL=$(date -u '+%Y-%m-%d %H:%M:%S')
"$PGBENCH" -n -h 127.0.0.1 -p "$PORT" -U postgres -c "$PRODUCERS" -j "$PRODUCERS" -R "$TPS" \
  -T "$DURATION" -P "$SAMPLE_S" -f "$WORK/enqueue.sql" "$DB" >"$WORK/pgbench.out" 2>"$WORK/pgbench.err" &
PGBENCH_PID=$!

# jobs is partitioned (docs/storage.md): its figures are the sums over its
# partitions; so are job_batches' and batch_receipts'.
STATS_SQL="select string_agg(name || ':' || live || ':' || dead || ':' || vac, ' ' order by name)
             from (select case when relname like 'jobs%' then 'jobs'
                               when relname like 'job_batches%' then 'job_batches'
                               else 'batch_receipts' end as name,
                          sum(n_live_tup) as live, sum(n_dead_tup) as dead,
                          sum(vacuum_count + autovacuum_count) as vac
                     from pg_stat_user_tables
                    where relname ~ '^(jobs_(unique|kept|slot_[0-7])|(job_batches|batch_receipts)_(kept|slot_[0-7]))$'
                    group by 1) as t"
SIZE_SQL="select sum(pg_total_relation_size(relid)) from pg_partition_tree('jobs_in')"
PARTS_SQL="select actor_worker_slot()"
SAMPLES="$WORK/samples"
: >"$SAMPLES"
minute=0
while kill -0 "$PGBENCH_PID" 2>/dev/null; do
  next=$(gawk -v s="$SOAK_START" -v m="$((minute + 1))" -v p="$SAMPLE_S" 'BEGIN { printf "%.3f", s + m * p }')
  while kill -0 "$PGBENCH_PID" 2>/dev/null && [ "$(fsub "$next" "$(now)" | cut -c1)" != - ]; do sleep 1; done
  kill -0 "$PGBENCH_PID" 2>/dev/null || break
  kill -0 "$WORKER_PID" 2>/dev/null || { tail -n 20 "$WORK/worker.log" >&2; die "the worker exited during the soak"; }
  minute=$((minute + 1))
  if [ "$HOLD" != 0 ] && [ "$minute" = "$HOLD_FROM" ]; then
    bench_hold_start "$HOLD" "$DB"; echo "# minute $minute: a transaction id is held open from now on"
  fi
  if [ "$minute" = "$HOLD_UNTIL" ] && [ -n "$HOLD_PID" ]; then
    bench_hold_stop; echo "# minute $minute: the held transaction ended"
  fi
  echo "$minute $(sql "$DB" -c "$STATS_SQL") size:$(sql "$DB" -c "$SIZE_SQL") parts:$(sql "$DB" -c "$PARTS_SQL") backlog:$(sql "$DB" -c "$BACKLOG_SQL")" >>"$SAMPLES"
  tail -n1 "$SAMPLES" | sed 's/^/# sample minute /'
done
bench_hold_stop
rc=0; wait "$PGBENCH_PID" || rc=$?
PGBENCH_PID=""
[ "$rc" = 0 ] || { cat "$WORK/pgbench.err" >&2; die "pgbench failed ($rc)"; }
TX=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$WORK/pgbench.out")
[ -n "$TX" ] || { cat "$WORK/pgbench.out" "$WORK/pgbench.err" >&2; die "cannot read pgbench's transaction count"; }
wait_drained 600 "$LEFT_SQL" 0.5
kill -TERM "$WORKER_PID"
rc=0; wait "$WORKER_PID" || rc=$?
WORKER_PID=""
[ "$rc" = 0 ] || { tail -n 20 "$WORK/worker.log" >&2; die "the worker exited with $rc after SIGTERM"; }

# ---- exactly once --------------------------------------------------------------------------------
ENQUEUED=$((DRAIN_N + TX * BATCH))
RAN=$(sed -n 's/.* \([0-9][0-9]*\) handler(s) ran;.*/\1/p' "$WORK/worker.log" | gawk '{ s += $1 } END { print s + 0 }')
DEAD_LETTERS=$(sql "$DB" -c "select count(*) from dead_letter_jobs")
echo "# enqueued $ENQUEUED jobs ($DRAIN_N + $TX transactions x $BATCH); handlers ran $RAN times; $DEAD_LETTERS dead letters"
grep -h -E '\] \[(warning|error|critical)\]' "$WORK/worker.log" | head -n 5 | sed 's/^/#   worker log: /' || true

# ---- the table -----------------------------------------------------------------------------------
# The worker's 10 s reports, bucketed into soak minutes by their timestamps.
START_EPOCH=$(date -u -d "$SOAK_START_WALL" +%s)
gawk -v start="$START_EPOCH" -v sample="$SAMPLE_S" '
  /queue default: [0-9]+ completed/ {
    ts = substr($1, 2) " " substr($2, 1, 8)
    gsub(/[-:]/, " ", ts)
    t = mktime(ts, 1)
    m = int((t - start - 0.001) / sample) + 1
    if (m < 1) next
    match($0, /: ([0-9]+) completed/, c); done[m] += c[1]
    if (match($0, /p99 ([0-9.]+) ms/, p)) { n[m]++; p99[m, n[m]] = p[1] }
  }
  END {
    for (m in done) {
      k = n[m]; med = ""
      if (k > 0) {
        for (i = 1; i <= k; i++) a[i] = p99[m, i]
        asort(a); med = a[int((k + 1) / 2)]; delete a
      }
      print m, done[m], med
    }
  }' "$WORK/worker.log" | sort -n >"$WORK/minutes"

# What the producer inserted each minute (pgbench's progress lines, one
# per SAMPLE_S from the soak's start): completions can only follow it, so
# a throughput that falls with it is the producer's, not the worker's.
gawk -v batch="$BATCH" '/^progress: / { m++; t = $4; printf "%d %.0f\n", m, t * batch }' \
  "$WORK/pgbench.err" >"$WORK/produced"

echo
echo "| minute | enqueued/s | completed/s | claim p99 ms (median of 10 s windows) | backlog | jobs live | jobs dead | jobs MB | job_batches live | job_batches dead | batch_receipts live | batch_receipts dead | vacuums of jobs | current ring slot |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
gawk -v sample="$SAMPLE_S" '
  FILENAME == ARGV[1] { made[$1] = $2; next }
  FILENAME == ARGV[2] { done[$1] = $2; p99[$1] = $3; next }
  {
    for (i = 2; i <= NF; i++) {
      if ($i ~ /^(jobs|job_batches|batch_receipts):/) {
        split($i, f, ":"); live[f[1]] = f[2]; dead[f[1]] = f[3]; vac[f[1]] = f[4]
      } else if ($i ~ /^size:/) { split($i, f, ":"); size = f[2]
      } else if ($i ~ /^parts:/) { split($i, f, ":"); parts = f[2]
      } else if ($i ~ /^backlog:/) { split($i, f, ":"); backlog = f[2] }
    }
    m = $1
    printf "| %d | %s | %.0f | %s | %s | %s | %s | %.0f | %s | %s | %s | %s | %s | %s |\n", m, made[m], done[m] / sample,
      p99[m], backlog, live["jobs"], dead["jobs"], size / 1048576, live["job_batches"] + 0,
      dead["job_batches"] + 0, live["batch_receipts"] + 0, dead["batch_receipts"] + 0,
      vac["jobs"], parts
  }' "$WORK/produced" "$WORK/minutes" "$SAMPLES"

# ---- the checks ----------------------------------------------------------------------------------
FAILED=0
WINDOW=$(( 300 / SAMPLE_S )); [ "$WINDOW" -ge 1 ] || WINDOW=1
# The run's own minutes only: the worker's log goes on past them while the
# backlog drains, and a partial minute there is no throughput of the run.
M=$(gawk -v last="$MINUTES" '$1 <= last' "$WORK/minutes" | wc -l)
read -r FIRST LAST P99_FIRST P99_LAST < <(gawk -v w="$WINDOW" -v M="$M" '
  { done[$1] = $2; p[$1] = $3 }
  END {
    for (m = 1; m <= w; m++) { f += done[m]; pf[m] = p[m] }
    for (m = M - w + 1; m <= M; m++) { l += done[m]; pl[m - M + w] = p[m] }
    asort(pf); asort(pl)
    printf "%.0f %.0f %s %s\n", f, l, pf[int((w + 1) / 2)], pl[int((w + 1) / 2)]
  }' "$WORK/minutes")
RATIO=$(fdiv "$LAST" "$FIRST" 3)
read -r MADE_FIRST MADE_LAST < <(gawk -v w="$WINDOW" -v M="$M" '
  { made[$1] = $2 }
  END {
    for (m = 1; m <= w; m++) f += made[m]
    for (m = M - w + 1; m <= M; m++) l += made[m]
    printf "%.0f %.0f\n", f / w, l / w
  }' "$WORK/produced")
RET_S=$(gawk -v r="$RETENTION" 'BEGIN { n = r + 0; u = r; sub(/^[0-9.]+/, "", u);
  m = (u == "ms") ? 0.001 : (u == "m") ? 60 : (u == "h") ? 3600 : 1; print int(n * m) }')
DEAD_BOUND=${DEAD_BOUND:-$(gawk -v r="$RATE" -v s="$RET_S" 'BEGIN { printf "%.0f", 0.25 * r * s + 5000 }')}
read -r MAX_DEAD MAX_SMALL < <(gawk '{
  for (i = 2; i <= NF; i++) if ($i ~ /:/) {
    split($i, f, ":")
    if (f[1] == "jobs" && f[3] > d) d = f[3]
    if (f[1] ~ /^(job_batches|batch_receipts)$/ && f[3] > s) s = f[3]
  } } END { print d + 0, s + 0 }' "$SAMPLES")
check() { if [ "$1" = 1 ]; then echo "# PASS $2"; else echo "# FAIL $2"; FAILED=1; fi; }
echo
check "$([ "$RAN" = "$ENQUEUED" ] && [ "$DEAD_LETTERS" = 0 ] && echo 1)" \
  "exactly once: $RAN handler runs for $ENQUEUED jobs, $DEAD_LETTERS dead letters"
check "$(gawk -v r="$RATIO" 'BEGIN { print (r >= 0.9) }')" \
  "throughput: last 5 min $(fdiv "$LAST" 300 0) jobs/s = $RATIO x the first 5 min ($(fdiv "$FIRST" 300 0) jobs/s); bound >= 0.9 (the producer inserted $MADE_FIRST and $MADE_LAST jobs/s)"
check "$(gawk -v d="$MAX_DEAD" -v b="$DEAD_BOUND" 'BEGIN { print (d <= b) }')" \
  "dead tuples of jobs: at most $MAX_DEAD in any sample; bound $DEAD_BOUND (25% of RATE x retention + 5,000)"
check "$(gawk -v d="$MAX_SMALL" 'BEGIN { print (d <= 100000) }')" \
  "dead tuples of job_batches, batch_receipts: at most $MAX_SMALL; bound 100,000"
check "$(gawk -v a="$P99_FIRST" -v b="$P99_LAST" 'BEGIN { print (b + 0 <= 1.5 * a + 2) }')" \
  "claim p99: ${P99_LAST:-?} ms in the last 5 min vs ${P99_FIRST:-?} ms in the first 5; bound 1.5 x + 2 ms"
echo "RESULT soak hold=$HOLD minutes=$MINUTES rate=$RATE drain_rate=$DRAIN_RATE throughput_ratio=$RATIO max_dead_jobs=$MAX_DEAD claim_p99_first_ms=${P99_FIRST:-0} claim_p99_last_ms=${P99_LAST:-0}"
exit "$FAILED"
