#!/usr/bin/env bash
# bench/sharding.sh - drain throughput of queues sharded across databases
# (issue 12): the same jobs in one database, and split over two databases
# on two PostgreSQL servers, drained by one worker process.
#
#   bench/sharding.sh                   # N=200000, concurrency 10 and 64
#   N=50000 CONCURRENCY=64 bench/sharding.sh
#   OUT=results/x.txt bench/sharding.sh
#
# Two throwaway PostgreSQL servers (scripts/pg.sh, initdb defaults) on PORT
# and PORT+1 (their own data directories: separate WAL, separate
# checkpointer, separate backends). Each run inserts N `noop` jobs with
# plain SQL, half in queue `a`, half in queue `b`, then starts one
# `actor-worker run` with `concurrency` C for each queue, and times the
# drain until every job is completed, then checks that every job completed
# on its first attempt and that no dead letter exists. Modes (MODES):
#
#   one   both queues in one database on the first server (a plain
#         single-database file)
#   two   queue `a` in the first server's database, queue `b` in a
#         [databases.second] on the second server
#
# The table gives the best run's jobs/s per mode and concurrency, the
# ratio two/one, the worker process's CPU seconds, and how busy the whole
# machine was during the drain (every core: on one machine the servers
# share them with the worker).
#
# Knobs: N (200000), CONCURRENCY (10,64), MODES (one,two), REPS (1),
# PORT (5520; the second server takes PORT+1), BIN (an actor-worker binary;
# default: build Release into build-bench), OUT (a file for the whole log),
# RUN_TIMEOUT (600 s per run).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
SCRIPT=sharding.sh
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"

N=${N:-200000}
CONCURRENCY=${CONCURRENCY:-10,64}
MODES=${MODES:-one,two}
REPS=${REPS:-1}
PORT=${PORT:-5520}
PORT2=$((PORT + 1))
RUN_TIMEOUT=${RUN_TIMEOUT:-600}
WORK=$(mktemp -d /tmp/aw-sharding-bench.XXXXXX)
LOG=$WORK/bench.log
BENCH_CLEANUP+=("rm -rf \"$WORK\"")

bench_build

# ---- the two servers ------------------------------------------------------------------------
bench_start_pg
PGDIR2=/tmp/aw-bench-$SCRIPT-pg2-$$
if (exec 3<>/dev/tcp/127.0.0.1/"$PORT2") 2>/dev/null; then
  die "port $PORT2 on 127.0.0.1 is already in use; refusing to start (set PORT=...)"
fi
BENCH_CLEANUP+=("\"$ROOT/scripts/pg.sh\" stop \"$PGDIR2\" || true; rm -rf \"$PGDIR2\"")
PG_FRESH=1 "$ROOT/scripts/pg.sh" start "$PGDIR2" "$PORT2"
sql_at() { local port=$1 db=$2; shift 2; PGOPTIONS="-c client_min_messages=warning" "${PSQL[@]}" -p "$port" -d "$db" "$@"; }
url_of() { echo "postgresql://postgres@127.0.0.1:$1/$2"; }

# CPU seconds of a process (utime + stime).
TICKS=$(getconf CLK_TCK)
proc_cpu() { awk -v t="$TICKS" '{ sub(/^.*\) /, ""); split($0, f, " "); printf "%.2f", (f[12] + f[13]) / t }' "/proc/$1/stat" 2>/dev/null || echo 0; }
# Busy and total jiffies of the whole machine (every core, every process).
machine_cpu() { awk '/^cpu / { t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t }' /proc/stat; }

# Whether jobs of queue Q are left in database DB on PORT: an open claim
# batch, a row-per-state job not finished, lane rows past the queue's
# cursor, or no cursor yet while it has lane rows. Index probes only (the
# `jobs` view would derive every row on every poll and load the server
# being measured).
left_in() {
  local port=$1 db=$2 queue=$3
  sql_at "$port" "$db" -c "select exists(select 1 from claim_batches where closed_at is null)
    or exists(select 1 from job_rows where ready_xid is null and state in ('available','scheduled','running'))
    or exists(select 1 from job_rows r where r.queue = '$queue' and r.ready_xid is not null
                and not exists(select 1 from claim_cursors c where c.queue = r.queue and c.priority = r.priority))
    or exists(select 1 from claim_cursors c, lateral (select 1 from job_rows r
                where r.queue = c.queue and r.priority = c.priority and r.ready_xid is not null
                  and (r.ready_xid, r.id) > (c.last_xid, c.last_id)
                order by r.ready_xid, r.id limit 1) x where c.queue = '$queue')"
}

# A fresh database DB on PORT.
fresh_db() {
  local port=$1 db=$2
  sql_at "$port" postgres -c "drop database if exists $db with (force)" -c "create database $db"
}

run_one() {
  local mode=$1 conc=$2 rep=$3
  local db=bench_${mode}_c${conc}_r${rep}
  local half=$((N / 2)) other=$((N - N / 2))
  local port_b=$PORT db_b=$db
  [ "$mode" = two ] && port_b=$PORT2
  fresh_db "$PORT" "$db"
  [ "$mode" = two ] && fresh_db "$PORT2" "$db"
  local cfg=$WORK/$db.toml
  {
    echo "[database]"
    echo "url = \"$(url_of "$PORT" "$db")\""
    if [ "$mode" = two ]; then
      echo
      echo "[databases.second]"
      echo "url = \"$(url_of "$PORT2" "$db")\""
    fi
    echo
    echo "[worker]"
    echo "node = \"bench\""
    echo
    echo "[queues.a]"
    echo "concurrency = $conc"
    echo
    echo "[queues.b]"
    echo "concurrency = $conc"
    [ "$mode" = two ] && echo "database = \"second\""
  } >"$cfg"
  # `migrate` migrates every database the file names.
  "$BIN" --config "$cfg" migrate --log-level warn || die "migrate failed ($mode)"
  sql_at "$PORT" "$db" -c "insert into jobs_in (kind, queue, args)
                           select 'noop', 'a', jsonb_build_object('id', i) from generate_series(1, $half) as i"
  sql_at "$port_b" "$db" -c "insert into jobs_in (kind, queue, args)
                             select 'noop', 'b', jsonb_build_object('id', i) from generate_series(1, $other) as i"
  sql_at "$PORT" "$db" -c "analyze" -c "checkpoint"
  [ "$mode" = two ] && sql_at "$PORT2" "$db" -c "analyze" -c "checkpoint"

  local t0 t1 pid wcpu mc0 mc1 b0 b1 tt0 tt1
  mc0=$(machine_cpu)
  t0=$(now)
  "$BIN" --config "$cfg" run --log-level info 2>"$WORK/$db.log" &
  pid=$!
  while [ "$(left_in "$PORT" "$db" a)" = t ] || [ "$(left_in "$port_b" "$db" b)" = t ]; do
    kill -0 "$pid" 2>/dev/null || { cat "$WORK/$db.log" >&2; die "the worker exited during the run"; }
    if [ "$(fsub "$(now)" "$t0" | cut -d. -f1)" -ge "$RUN_TIMEOUT" ]; then
      die "run timed out after $RUN_TIMEOUT s"
    fi
    sleep 0.1
  done
  t1=$(now)
  mc1=$(machine_cpu)
  wcpu=$(proc_cpu "$pid")
  kill -TERM "$pid"
  wait "$pid" || { cat "$WORK/$db.log" >&2; die "the worker did not stop cleanly"; }

  # Every job completed on its first attempt, none dead-lettered.
  local once dead
  once=$(( $(sql_at "$PORT" "$db" -c "select count(*) from jobs where state = 'completed' and attempt = 1") ))
  dead=$(( $(sql_at "$PORT" "$db" -c "select count(*) from dead_letter_jobs") ))
  if [ "$mode" = two ]; then
    once=$((once + $(sql_at "$PORT2" "$db" -c "select count(*) from jobs where state = 'completed' and attempt = 1")))
    dead=$((dead + $(sql_at "$PORT2" "$db" -c "select count(*) from dead_letter_jobs")))
  fi
  [ "$once" = "$N" ] && [ "$dead" = 0 ] || die "job check failed: $once of $N completed once, $dead dead letters"
  local sec jps
  sec=$(fsub "$t1" "$t0")
  jps=$(fdiv "$N" "$sec" 0)
  read -r b0 tt0 <<<"$mc0"; read -r b1 tt1 <<<"$mc1"
  echo "RESULT $mode/c$conc/run$rep jobs_per_sec=$jps seconds=$sec worker_cpu=$wcpu machine_busy_pct=$(fdiv "$((100 * (b1 - b0)))" "$((tt1 - tt0))" 0)"
  sql_at "$PORT" postgres -c "drop database $db with (force)"
  [ "$mode" = two ] && sql_at "$PORT2" postgres -c "drop database $db with (force)"
  return 0
}

{
  echo "# sharding.sh: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), N=$N CONCURRENCY=$CONCURRENCY REPS=$REPS"
  echo "# two PostgreSQL servers on ports $PORT and $PORT2 of this machine (they share its cores and disk)"
  IFS=, read -r -a CONCS <<<"$CONCURRENCY"
  IFS=, read -r -a MODE_LIST <<<"$MODES"
  for c in "${CONCS[@]}"; do
    for ((r = 1; r <= REPS; r++)); do
      for mode in "${MODE_LIST[@]}"; do
        case "$mode" in one | two) ;; *) die "unknown mode $mode (one, two)" ;; esac
        run_one "$mode" "$c" "$r"
      done
    done
  done
} 2>&1 | tee "$LOG"

# The table: best jobs/s per mode and concurrency, ratio two/one.
gawk '
  /^RESULT / {
    split($2, part, "/"); mode = part[1]; conc = substr(part[2], 2)
    for (i = 3; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
    key = mode "/" conc
    if (!(conc in seen)) { seen[conc] = 1; concs[++n] = conc }
    if (v["jobs_per_sec"] + 0 > rate[key]) {
      rate[key] = v["jobs_per_sec"] + 0; w[key] = v["worker_cpu"]; busy[key] = v["machine_busy_pct"]
    }
  }
  END {
    printf "\n| concurrency (per queue) | databases | jobs/s (best run) | two / one | worker CPU s | machine CPU busy |\n"
    printf "| ---: | --- | ---: | ---: | ---: | ---: |\n"
    for (i = 1; i <= n; i++) {
      c = concs[i]
      for (m = 1; m <= 2; m++) {
        mode = (m == 1 ? "one" : "two"); key = mode "/" c
        if (!(key in rate)) continue
        ratio = (mode == "two" && rate["one/" c] > 0) ? sprintf("%.2f", rate[key] / rate["one/" c]) : "-"
        printf "| %s | %s | %d | %s | %s | %s%% |\n", c, mode, rate[key], ratio, w[key], busy[key]
      }
    }
  }
' "$LOG" | tee -a "$LOG"

if [ -n "${OUT:-}" ]; then
  cp "$LOG" "$OUT"
  echo "bench/sharding.sh: the whole log is in $OUT" >&2
fi
