#!/usr/bin/env bash
# The simulations of issue 48 (docs/delivery.md). This branch carries only
# the SQL mode; the whole-runtime simulation (model mode) comes with the
# model's branch, which keeps the `--sql` line below.
#
#   scripts/simulate.sh --sql --seeds N [--seed S]   random multi-session
#       schedules against the real SQL (scripts/simulate-sql.sh)
set -euo pipefail
for arg in "$@"; do
  if [ "$arg" = "--sql" ]; then
    exec "$(dirname "$0")/simulate-sql.sh" "$@"
  fi
done
echo "simulate.sh: only --sql is on this branch (the model mode is on sim-48)" >&2
exit 2
