#!/usr/bin/env bash
# The README as printed (ctest docs_readme):
#   1. at most 300 lines, and every docs/ page it links exists;
#   2. its TOML example is a valid configuration (`actor-worker check`);
#   3. its C++ example builds (target docs_readme_example, extracted from
#      README.md at build time) and runs against a fresh database: it exits
#      0 only when its job ran.
#
#   test/docs/readme_test.sh BUILD_DIR SOURCE_DIR ACTOR_WORKER EXAMPLE_BINARY
#   (AW_TEST_DATABASE_URL set)
set -euo pipefail
BUILD=$1 SRC=$2 BIN=$3 EXAMPLE=$4
: "${AW_TEST_DATABASE_URL:?run through ctest (AW_TEST_DATABASE_URL)}"
WORK=$(mktemp -d /tmp/aw-readme.XXXXXX)
DB=aw_readme_example_$$
cleanup() {
  psql -X -q "$AW_TEST_DATABASE_URL" -c "drop database if exists $DB" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "docs_readme: $*" >&2; exit 1; }

lines=$(wc -l <"$SRC/README.md")
[ "$lines" -le 300 ] || fail "README.md has $lines lines; at most 300 (the rest belongs in docs/)"
for page in $(grep -o '](docs/[^)#]*' "$SRC/README.md" | sed 's/^](//' | sort -u); do
  [ -e "$SRC/$page" ] || fail "README.md links $page, which does not exist"
done

"$SRC/test/docs/readme_extract.sh" toml "$SRC/README.md" "$WORK/readme.toml"
"$BIN" --config "$WORK/readme.toml" check >"$WORK/check.out" 2>&1 \
  || { cat "$WORK/check.out"; fail "the README's TOML example is not a valid configuration"; }

cmake --build "$BUILD" --target docs_readme_example >"$WORK/build.log" 2>&1 \
  || { cat "$WORK/build.log"; fail "the README's C++ example does not build"; }
psql -X -q "$AW_TEST_DATABASE_URL" -c "create database $DB" >/dev/null
URL=${AW_TEST_DATABASE_URL%/*}/$DB
DATABASE_URL=$URL timeout 120 "$EXAMPLE" | tee "$WORK/run.out" \
  || fail "the README's C++ example failed"
grep -q 'hello, world' "$WORK/run.out" || fail "the README's C++ example did not run its job"
echo "docs_readme: README.md has $lines lines; its TOML checks, its C++ example builds and runs"
