#!/usr/bin/env bash
# The deterministic simulation of issue 48 (docs/delivery.md):
#
#   scripts/simulate.sh --seeds N [--seed S] [--nodes K] [--faults PROFILE]
#                       [--trace-hash] [--stop-at-first] [--tail LINES]
#   scripts/simulate.sh --sql --seeds N ...
#
# Model mode (the default) builds aw_simulate in its own build directory
# (SIM_BUILD_DIR, default build-sim), configured with -DAW_SIM_MUTATIONS=ON
# so that AW_SIM_MUTATION=NAME can switch a planted mutation on
# (claim_no_recheck, outcome_by_id, rescue_unguarded, followup_twice), and
# runs it: K worker nodes on CAF's test coordinator over the model
# database. The last line is "N seeds, V violations" (with --trace-hash:
# the trace hash of the last seed); the exit status is 1 on any violation.
#
# --sql runs the random multi-session schedules against the real SQL
# instead (scripts/simulate-sql.sh, which takes the arguments as they are).
set -euo pipefail
cd "$(dirname "$0")/.."

sql=0
args=()
for arg in "$@"; do
  if [[ $arg == --sql ]]; then sql=1; else args+=("$arg"); fi
done

build_dir=${SIM_BUILD_DIR:-build-sim}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}

build() {
  local log
  log=$(mktemp)
  if ! { cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
           -DAW_BUILD_TESTS=ON -DAW_BUILD_BENCH=OFF -DAW_SIM_MUTATIONS=ON \
         && cmake --build "$build_dir" -j"${SIM_BUILD_JOBS:-$(nproc)}" --target "$@"; } >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "simulate.sh: the build failed" >&2
    exit 2
  fi
  rm -f "$log"
}

if (( sql )); then
  exec scripts/simulate-sql.sh "$@"
fi

build aw_simulate
exec "$build_dir/test/aw_simulate" "${args[@]}"
