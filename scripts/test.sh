#!/usr/bin/env bash
# The README's test command: installs the dependencies, builds, and runs
# every test (unit, deterministic actor tests, and tests against a real
# PostgreSQL that ctest starts and stops itself). Fails if any test fails
# or is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
BUILD_DIR=${BUILD_DIR:-build} scripts/build.sh -DAW_BUILD_TESTS=ON
cd "${BUILD_DIR:-build}"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
ctest --output-on-failure -j"$(nproc)" --timeout 900 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
if grep -qE "\*\*\*Skipped|Not Run" "$log"; then
  echo "test.sh: some tests were skipped or not run; every test must run" >&2
  exit 1
fi
passed=$(grep -cE "Test +#[0-9]+: .* Passed" "$log" || true)
failed=$(grep -cE "Test +#[0-9]+: .*\*\*\*(Failed|Timeout|Exception)" "$log" || true)
echo "ctest: $passed passed, $failed failed"
exit "$status"
