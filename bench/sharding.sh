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
# The table gives jobs/s per mode and concurrency, the ratio two/one, and
# the CPU seconds of the worker process and of each server's backends.
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
# CPU seconds of every backend of database DB on PORT (run while they live).
backends_cpu() {
  local port=$1 db=$2 total=0 pid
  for pid in $(sql_at "$port" postgres -c "select pid from pg_stat_activity where datname = '$db' and pid <> pg_backend_pid()"); do
    total=$(awk -v a="$total" -v b="$(proc_cpu "$pid")" 'BEGIN { print a + b }')
  done
  echo "$total"
}

# A fresh migrated database DB on PORT.
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
  sql_at "$PORT" "$db" -c "insert into jobs (kind, queue, args)
                           select 'noop', 'a', jsonb_build_object('id', i) from generate_series(1, $half) as i"
  sql_at "$port_b" "$db" -c "insert into jobs (kind, queue, args)
                             select 'noop', 'b', jsonb_build_object('id', i) from generate_series(1, $other) as i"
  sql_at "$PORT" "$db" -c "analyze" -c "checkpoint"
  [ "$mode" = two ] && sql_at "$PORT2" "$db" -c "analyze" -c "checkpoint"

  local t0 t1 pid left cpu_a=0 cpu_b=0 wcpu
  t0=$(now)
  "$BIN" --config "$cfg" run --log-level info 2>"$WORK/$db.log" &
  pid=$!
  while :; do
    left=$(( $(sql_at "$PORT" "$db" -c "select count(*) from jobs where state <> 'completed'") ))
    if [ "$mode" = two ]; then
      left=$((left + $(sql_at "$PORT2" "$db" -c "select count(*) from jobs where state <> 'completed'")))
    fi
    [ "$left" = 0 ] && break
    kill -0 "$pid" 2>/dev/null || { cat "$WORK/$db.log" >&2; die "the worker exited during the run"; }
    if [ "$(fsub "$(now)" "$t0" | cut -d. -f1)" -ge "$RUN_TIMEOUT" ]; then
      die "run timed out after $RUN_TIMEOUT s ($left jobs left)"
    fi
    # Backends' CPU while they live (the last sample stands).
    cpu_a=$(backends_cpu "$PORT" "$db")
    [ "$mode" = two ] && cpu_b=$(backends_cpu "$PORT2" "$db")
    sleep 0.05
  done
  t1=$(now)
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
  echo "RESULT $mode/c$conc/run$rep jobs_per_sec=$jps seconds=$sec worker_cpu=$wcpu server1_cpu=$cpu_a server2_cpu=$cpu_b"
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
      rate[key] = v["jobs_per_sec"] + 0; w[key] = v["worker_cpu"]; s1[key] = v["server1_cpu"]; s2[key] = v["server2_cpu"]
    }
  }
  END {
    printf "\n| concurrency (per queue) | databases | jobs/s | two / one | worker CPU s | server 1 backends CPU s | server 2 backends CPU s |\n"
    printf "| ---: | --- | ---: | ---: | ---: | ---: | ---: |\n"
    for (i = 1; i <= n; i++) {
      c = concs[i]
      for (m = 1; m <= 2; m++) {
        mode = (m == 1 ? "one" : "two"); key = mode "/" c
        if (!(key in rate)) continue
        ratio = (mode == "two" && rate["one/" c] > 0) ? sprintf("%.2f", rate[key] / rate["one/" c]) : "-"
        printf "| %s | %s | %d | %s | %s | %s | %s |\n", c, mode, rate[key], ratio, w[key], s1[key], (mode == "two" ? s2[key] : "-")
      }
    }
  }
' "$LOG" | tee -a "$LOG"

if [ -n "${OUT:-}" ]; then
  cp "$LOG" "$OUT"
  echo "bench/sharding.sh: the whole log is in $OUT" >&2
fi
