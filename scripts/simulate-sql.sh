#!/usr/bin/env bash
# The SQL half of scripts/simulate.sh (it execs this for --sql): random
# multi-session schedules against the real SQL (docs/delivery.md#sql-schedules).
#
#   scripts/simulate-sql.sh [--seeds N] [--seed S] [--steps K] [--verbose]
#
# Builds test/sim/sql (BUILD_DIR, default build), then runs seeds S ..
# S+N-1 (default 1 .. 200) against DATABASE_URL, or against a throwaway
# PostgreSQL of its own (scripts/pg.sh, port AW_SIM_PG_PORT, default 25431)
# when DATABASE_URL is unset. AW_SIM_MUTATION=NAME plants a mutation
# (test/sim/sql/mutations.cpp). The last line is "N seeds, V violations";
# the exit status is non-zero on any violation.
set -euo pipefail
cd "$(dirname "$0")/.."
args=()
seeds=200
while [ $# -gt 0 ]; do
  case "$1" in
    --sql) shift ;;
    --seeds) seeds=$2; shift 2 ;;
    --seed|--steps) args+=("$1" "$2"); shift 2 ;;
    --verbose|--expect-caught) args+=("$1"); shift ;;
    *) echo "simulate-sql.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
BUILD_DIR=${BUILD_DIR:-build}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
{
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" \
        -DAW_BUILD_TESTS=ON
  cmake --build "$BUILD_DIR" --target sql_schedules -j"${JOBS:-$(nproc)}"
} >&2
if [ -z "${DATABASE_URL:-}" ]; then
  port=${AW_SIM_PG_PORT:-25431}
  dir=$(mktemp -d /tmp/aw-sim-sql-pg.XXXXXX)
  chmod 755 "$dir"
  trap 'scripts/pg.sh stop "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
  PG_FRESH=1 scripts/pg.sh start "$dir" "$port" >&2
  DATABASE_URL=$(scripts/pg.sh url "$port")
  export DATABASE_URL
fi
"$BUILD_DIR/test/sim/sql/sql_schedules" --seeds "$seeds" "${args[@]}"
