#!/usr/bin/env bash
# bench/compare.sh - actor-worker, graphile-worker and pg-boss side by side,
# on one throwaway PostgreSQL (initdb defaults, synchronous_commit = on), in
# one run, and a table of the results.
#
#   bench/compare.sh                 # the full comparison (about 10 minutes)
#   N=50000 bench/compare.sh         # quicker
#
# Runs, one after another against the same server:
#   bench/run.sh                     actor-worker, concurrency 10, 64, 500,
#                                    1 and 2 processes (shipped defaults
#                                    apart from the concurrency)
#   bench/peers/graphile_worker.sh   graphile-worker 0.18 batched
#                                    (localQueue.size 500, completeJobBatchDelay 0,
#                                    24 concurrent jobs per process), 1 and 2
#                                    processes
#   bench/peers/pgboss.sh            pg-boss 12.38, its four configurations
# Every system drains the same N no-op jobs inserted in one statement, and
# every run checks that each job ran exactly once. graphile-worker and
# pg-boss are installed from npm into a cache directory by their scripts;
# Node.js comes from the system (this script installs Debian's nodejs and
# npm when `node` is missing).
#
# Every system runs in each weather of HOLDS (0,1,same): 0 clear; 1 with a
# session holding a transaction id open in another database of the server
# for the whole run (an idle-in-transaction client elsewhere); same: in the
# queue's own database. Ratios compare systems within one weather.
#
# BASE_BIN=/path/to/an/older/actor-worker: an A/B in the same run; in every
# weather that build drains right before this one (labelled
# actor-worker-base), and the table gives the ratio of each cell to it.
#
# Knobs: N (200000), REPS (1), PORT (5497), HOLDS (0,1,same), BASE_BIN,
# AW_CONCURRENCY (10,64,500),
# AW_PROCS (1,2), GW_CONFIGS (batch:1,batch:2),
# PB_CONFIGS (b100x4:1,b100x4:2,b500x2:1,b500x2:2), OUT (a file to copy the
# whole log to).
#
# Output: every script's own lines, then a table: jobs/s of each system and
# configuration, actor-worker's ratio to graphile-worker's and pg-boss's
# best configuration, WAL bytes, commits and worker-process CPU per job.
# Only ratios from one run mean anything: machines differ by 2x and these
# ones are shared.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
export N=${N:-200000}
export REPS=${REPS:-1}
PORT=${PORT:-5497}
PGDIR=${PGDIR:-/tmp/aw-compare-pg-$$}
HOLDS=${HOLDS:-0,1,same}
LOG=$(mktemp /tmp/aw-compare.XXXXXX.log)

"$ROOT/scripts/install-deps.sh"
if ! command -v node >/dev/null 2>&1; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  echo "compare.sh: installing nodejs and npm (Debian packages)" >&2
  $sudo apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi

if (exec 3<>/dev/tcp/127.0.0.1/"$PORT") 2>/dev/null; then
  echo "compare.sh: port $PORT on 127.0.0.1 is already in use (set PORT=...)" >&2
  exit 1
fi
cleanup() {
  "$ROOT/scripts/pg.sh" stop "$PGDIR" || true
  rm -rf "$PGDIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
PG_FRESH=1 "$ROOT/scripts/pg.sh" start "$PGDIR" "$PORT"
export BENCH_EXTERNAL_PG=1 PORT

{
  echo "# compare.sh: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, N=$N REPS=$REPS"
  for weather in ${HOLDS//,/ }; do
    echo "# weather: $weather"
    export HOLD=$weather
    if [ -n "${BASE_BIN:-}" ]; then
      BIN=$BASE_BIN LABEL=actor-worker-base CONCURRENCY=${AW_CONCURRENCY:-10,64,500} \
        PROCS=${AW_PROCS:-1,2} "$HERE/run.sh"
    fi
    CONCURRENCY=${AW_CONCURRENCY:-10,64,500} PROCS=${AW_PROCS:-1,2} "$HERE/run.sh"
    CONFIGS=${GW_CONFIGS:-batch:1,batch:2} "$HERE/peers/graphile_worker.sh"
    CONFIGS=${PB_CONFIGS:-b100x4:1,b100x4:2,b500x2:1,b500x2:2} "$HERE/peers/pgboss.sh"
  done
} 2>&1 | tee "$LOG"

# The table: one row per run (RESULT line with a run number), with the
# figures of the "during drain" line printed before it.
gawk '
  /^# weather: / { weather = $3 }
  /during drain:/ {
    wal = ""; commits = ""; cpu = ""
    if (match($0, /\(([0-9]+) B\/job\)/, m)) wal = m[1]
    if (match($0, /\(([0-9.]+)\/job\)/, m)) commits = m[1]
    if (match($0, /worker-process CPU ([0-9.]+) s/, m)) cpu = m[1]
  }
  /^RESULT [^ ]+\/run[0-9]+ / {
    split($2, part, "/")
    sysname = part[1]; config = $2; sub(/^[^\/]+\//, "", config); sub(/\/run[0-9]+$/, "", config)
    jps = $3; sub(/jobs_per_sec=/, "", jps)
    jobs = $4; sub(/jobs=/, "", jobs)
    n++
    sys_[n] = sysname; cfg_[n] = config; jps_[n] = jps + 0; w_[n] = weather
    if (sysname == "actor-worker-base") base[config, weather] = jps + 0
    wal_[n] = wal; commits_[n] = commits
    cpu_[n] = (cpu == "" ? "" : sprintf("%.1f", cpu * 1e6 / jobs))
    key = sysname SUBSEP weather
    if (jps + 0 > best[key]) best[key] = jps + 0
  }
  END {
    printf "\nweather: 0 clear; 1 an xid held open in another database; same: in the queue'"'"'s own\n"
    printf "\n| weather | system | configuration | jobs/s | x graphile-worker best | x pg-boss best | x base | WAL B/job | commits/job | worker CPU us/job |\n"
    printf "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"
    for (i = 1; i <= n; i++) {
      gw = best["graphile-worker", w_[i]]; pb = best["pg-boss", w_[i]]
      b = (sys_[i] == "actor-worker" ? base[cfg_[i], w_[i]] : 0)
      printf "| %s | %s | %s | %d | %s | %s | %s | %s | %s | %s |\n", w_[i], sys_[i], cfg_[i], jps_[i],
             (gw > 0 ? sprintf("%.2f", jps_[i] / gw) : "-"),
             (pb > 0 ? sprintf("%.2f", jps_[i] / pb) : "-"),
             (b > 0 ? sprintf("%.2f", jps_[i] / b) : "-"),
             wal_[i], commits_[i], cpu_[i]
    }
    for (k in best) {
      split(k, kk, SUBSEP)
      if (kk[1] != "actor-worker") printf "%s best in weather %s: %d jobs/s\n", kk[1], kk[2], best[k]
    }
  }
' "$LOG" | tee -a "$LOG"

if [ -n "${OUT:-}" ]; then
  cp "$LOG" "$OUT"
  echo "compare.sh: the whole log is in $OUT" >&2
fi
rm -f "$LOG"
