# bench/lib.sh - shared by the bench scripts (sourced, not run): helpers,
# the Release build, and a throwaway PostgreSQL that is always stopped.
#
# The sourcing script sets SCRIPT (its name for messages) and may set
# BIN, BUILD_DIR, PORT, PGDIR before calling bench_build / bench_start_pg.

die() { echo "bench/$SCRIPT: $*" >&2; exit 1; }
now() { echo "$EPOCHREALTIME"; }
fsub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a - b }'; }
fdiv() { awk -v a="$1" -v b="$2" -v p="${3:-3}" 'BEGIN { printf "%.*f", p, (b == 0 ? 0 : a / b) }'; }

# Builds the targets "$@" (Release, tests off) into BUILD_DIR, unless BIN
# is set; sets BIN (the actor-worker binary) and TOOLS (the directory of
# bench/tools' binaries).
bench_build() {
  BUILD_DIR=${BUILD_DIR:-$ROOT/build-bench}
  if [ -n "${BIN:-}" ] && [ $# -eq 0 ]; then
    [ -x "$BIN" ] || die "BIN=$BIN is not an executable"
    return
  fi
  echo "# building $* actor-worker (Release) in $BUILD_DIR" >&2
  cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DAW_BUILD_TESTS=OFF \
    -DAW_BUILD_BENCH=ON >/dev/null || die "cmake configure failed"
  cmake --build "$BUILD_DIR" -j"$(nproc)" --target actor-worker "$@" >/dev/null \
    || die "build failed"
  BIN=${BIN:-$BUILD_DIR/actor-worker}
  TOOLS=$BUILD_DIR/bench
}

# Starts a fresh cluster in PGDIR on PORT (refusing a busy port) and
# registers its removal; defines sql DB ARGS...
bench_start_pg() {
  PGDIR=${PGDIR:-/tmp/aw-bench-$SCRIPT-pg-$$}
  if (exec 3<>/dev/tcp/127.0.0.1/"$PORT") 2>/dev/null; then
    die "port $PORT on 127.0.0.1 is already in use; refusing to start (set PORT=...)"
  fi
  BENCH_CLEANUP+=("\"$ROOT/scripts/pg.sh\" stop \"$PGDIR\" || true; rm -rf \"$PGDIR\"")
  PG_FRESH=1 "$ROOT/scripts/pg.sh" start "$PGDIR" "$PORT"
}
PSQL=(psql -X -q -A -t -v ON_ERROR_STOP=1 -h 127.0.0.1 -U postgres)
sql() { local db=$1; shift; PGOPTIONS="-c client_min_messages=warning" "${PSQL[@]}" -p "$PORT" -d "$db" "$@"; }

# Cleanup steps, run in reverse order on exit.
BENCH_CLEANUP=()
bench_cleanup() {
  local i
  for ((i = ${#BENCH_CLEANUP[@]} - 1; i >= 0; i--)); do eval "${BENCH_CLEANUP[$i]}"; done
}
trap bench_cleanup EXIT
trap 'exit 130' INT TERM

# A session holding a transaction id open, as an idle-in-transaction client
# does: bench_hold_start WEATHER DB, where WEATHER is 0 (nothing), 1 (in
# another database: postgres) or same (in DB); bench_hold_stop ends it.
HOLD_PID=""
bench_hold_start() {
  local weather=$1 db=$2 fifo tries=0
  case "$weather" in 0) return 0 ;; 1) db=postgres ;; same) ;; *) die "a weather is 0, 1 or same, not '$weather'" ;; esac
  fifo=$(mktemp -u /tmp/aw-bench-hold.XXXXXX)
  mkfifo "$fifo"
  "${PSQL[@]}" -p "$PORT" -d "$db" <"$fifo" >/dev/null 2>&1 &
  HOLD_PID=$!
  exec {HOLD_FD}>"$fifo"
  rm -f "$fifo"
  printf 'begin;\nselect txid_current();\n' >&"$HOLD_FD"
  until [ "$(sql postgres -c "select count(*) from pg_stat_activity
                               where backend_xid is not null and state = 'idle in transaction'")" != 0 ]; do
    tries=$((tries + 1)); [ "$tries" -lt 250 ] || die "the holding transaction did not start"
    sleep 0.02
  done
  BENCH_CLEANUP+=("kill -KILL $HOLD_PID 2>/dev/null || true")
}
bench_hold_stop() {
  [ -n "$HOLD_PID" ] || return 0
  printf 'rollback;\n\\q\n' >&"$HOLD_FD"
  exec {HOLD_FD}>&-
  wait "$HOLD_PID" 2>/dev/null || true
  HOLD_PID=""
}
