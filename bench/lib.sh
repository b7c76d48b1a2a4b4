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
