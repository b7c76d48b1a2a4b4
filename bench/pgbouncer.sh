#!/usr/bin/env bash
# bench/pgbouncer.sh - drain throughput straight to PostgreSQL and through a
# real PgBouncer in transaction pooling mode, side by side (issue 12).
#
#   bench/pgbouncer.sh                  # N=100000, concurrency 10 and 64
#   N=20000 bench/pgbouncer.sh          # quicker
#   OUT=results/x.txt bench/pgbouncer.sh
#
# One throwaway PostgreSQL (scripts/pg.sh, initdb defaults) and one
# PgBouncer (Debian's, pool_mode = transaction, default_pool_size =
# PGB_POOL) in front of it. For each concurrency, bench/run.sh drains the
# same N `noop` jobs (one process, fresh database, every job checked to run
# exactly once) in each mode of MODES:
#
#   direct      shipped defaults, straight to PostgreSQL (named prepared
#               statements, LISTEN)
#   unprepared  `pooler = "transaction"` but straight to PostgreSQL: what
#               the setting costs without the pooler (unnamed statements,
#               each sent with its text)
#   pgbouncer   through PgBouncer with `pooler = "transaction"` and
#               `listen_url` straight to PostgreSQL (the documented setup)
#
# and prints a table: jobs/s of each mode, its ratio to `direct`, and the
# CPU seconds PgBouncer used during the run (it is single-threaded and
# shares the cores with everything else).
#
# Knobs: N (100000), CONCURRENCY (10,64), PROCS (1), MODES
# (direct,unprepared,pgbouncer), PORT (5496) the server, PGB_PORT (PORT+1)
# PgBouncer, PGB_POOL (20) server connections per database, BIN (an
# actor-worker binary; default: build Release into build-bench), OUT (a
# file to copy the whole log to).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
SCRIPT=pgbouncer.sh
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"

N=${N:-100000}
CONCURRENCY=${CONCURRENCY:-10,64}
PROCS=${PROCS:-1}
MODES=${MODES:-direct,unprepared,pgbouncer}
PORT=${PORT:-5496}
PGB_PORT=${PGB_PORT:-$((PORT + 1))}
PGB_POOL=${PGB_POOL:-20}
LOG=$(mktemp /tmp/aw-pgbouncer-bench.XXXXXX.log)
BENCH_CLEANUP+=("rm -f \"$LOG\"")

command -v pgbouncer >/dev/null 2>&1 || die "pgbouncer is not installed (apt-get install pgbouncer)"
bench_build
export BIN

# ---- the server and the pooler -------------------------------------------------------------
bench_start_pg
if (exec 3<>/dev/tcp/127.0.0.1/"$PGB_PORT") 2>/dev/null; then
  die "port $PGB_PORT on 127.0.0.1 is already in use; refusing to start (set PGB_PORT=...)"
fi
PGB_DIR=$(mktemp -d /tmp/aw-bench-pgbouncer.XXXXXX)
chmod 777 "$PGB_DIR" # as root, PgBouncer runs as postgres and writes its log here
cat >"$PGB_DIR/userlist.txt" <<EOF
"postgres" ""
EOF
cat >"$PGB_DIR/pgbouncer.ini" <<EOF
[databases]
* = host=127.0.0.1 port=$PORT
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $PGB_PORT
unix_socket_dir =
auth_type = trust
auth_file = $PGB_DIR/userlist.txt
pool_mode = transaction
default_pool_size = $PGB_POOL
max_client_conn = 500
logfile = $PGB_DIR/pgbouncer.log
pidfile = $PGB_DIR/pgbouncer.pid
EOF
BENCH_CLEANUP+=("[ -f \"$PGB_DIR/pgbouncer.pid\" ] && kill \$(cat \"$PGB_DIR/pgbouncer.pid\") 2>/dev/null; sleep 0.2; rm -rf \"$PGB_DIR\"")
as_user=()
[ "$(id -u)" = 0 ] && as_user=(-u postgres)
pgbouncer -d -q "${as_user[@]}" "$PGB_DIR/pgbouncer.ini" || die "pgbouncer did not start: $(cat "$PGB_DIR/pgbouncer.log" 2>/dev/null)"
for _ in $(seq 100); do
  PGCONNECT_TIMEOUT=2 psql -X -q -A -t -h 127.0.0.1 -p "$PGB_PORT" -U postgres -d postgres -c 'select 1' >/dev/null 2>&1 && break
  sleep 0.1
done
PGB_PID=$(cat "$PGB_DIR/pgbouncer.pid")
TICKS=$(getconf CLK_TCK)
pgb_cpu() { awk -v t="$TICKS" '{ sub(/^.*\) /, ""); split($0, f, " "); printf "%.2f", (f[12] + f[13]) / t }' "/proc/$PGB_PID/stat"; }

# ---- the runs ---------------------------------------------------------------------------------
{
  echo "# pgbouncer.sh: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, N=$N CONCURRENCY=$CONCURRENCY PROCS=$PROCS"
  echo "# $(pgbouncer --version | head -n1): pool_mode = transaction, default_pool_size = $PGB_POOL, port $PGB_PORT"
  IFS=, read -r -a CONCS <<<"$CONCURRENCY"
  IFS=, read -r -a MODE_LIST <<<"$MODES"
  for c in "${CONCS[@]}"; do
    for mode in "${MODE_LIST[@]}"; do
      case "$mode" in
        direct) wport=$PORT db_toml="" ;;
        unprepared) wport=$PORT db_toml='pooler = "transaction"' ;;
        pgbouncer) wport=$PGB_PORT db_toml=$'pooler = "transaction"\nlisten_url = "@URL@"' ;;
        *) die "unknown mode $mode (direct, unprepared, pgbouncer)" ;;
      esac
      echo "# ---- mode $mode, concurrency $c"
      cpu0=$(pgb_cpu)
      BENCH_EXTERNAL_PG=1 PORT=$PORT WORKER_PORT=$wport DB_TOML=$db_toml \
        CONCURRENCY=$c PROCS=$PROCS REPS=1 N=$N "$HERE/run.sh" \
        | sed -e "s|^RESULT actor-worker/|RESULT $mode/|" -e "s|^RESULT actor-worker |RESULT $mode |"
      echo "# pgbouncer CPU during mode $mode c$c: $(fsub "$(pgb_cpu)" "$cpu0") s"
    done
  done
} 2>&1 | tee "$LOG"

# The table: jobs/s per mode and concurrency, ratio to direct.
gawk '
  /^# pgbouncer CPU during mode/ { m = $6; c = $7; sub(/:$/, "", c); cpu[m "/" c] = $8 }
  /^RESULT [^ ]+\/c[0-9]+\/p[0-9]+\/run[0-9]+ / {
    split($2, part, "/"); mode = part[1]; conc = part[2]
    jps = $3; sub(/jobs_per_sec=/, "", jps)
    key = mode "/" conc
    if (!(key in rate)) { order[++n] = key; mode_[n] = mode; conc_[n] = conc }
    rate[key] = jps + 0
  }
  END {
    printf "\n| concurrency | mode | jobs/s | / direct | PgBouncer CPU s |\n| ---: | --- | ---: | ---: | ---: |\n"
    for (i = 1; i <= n; i++) {
      d = rate["direct/" conc_[i]]
      printf "| %s | %s | %d | %s | %s |\n", substr(conc_[i], 2), mode_[i], rate[order[i]],
             (d > 0 ? sprintf("%.2f", rate[order[i]] / d) : "-"),
             (mode_[i] == "pgbouncer" ? cpu[order[i]] : "-")
    }
  }
' "$LOG" | tee -a "$LOG"

if [ -n "${OUT:-}" ]; then
  cp "$LOG" "$OUT"
  echo "bench/pgbouncer.sh: the whole log is in $OUT" >&2
fi
