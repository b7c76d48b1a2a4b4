#!/usr/bin/env bash
# The installed package, as an application sees it (ctest entry
# "package_example"):
#   1. `cmake --install` the build into a temporary prefix;
#   2. build examples/embedded against it with find_package(actor_worker);
#   3. run it against a fresh database on the test server: it exits 0 only
#      when its handler ran, its hook fired and its durable follow-up
#      committed;
#   4. compile and link a small program with the pkg-config file alone;
#   5. check the installed migrations and the systemd unit;
#   6. check that docs/embedding.md shows the example as it is.
#
#   test/package/run.sh BUILD_DIR SOURCE_DIR     (AW_TEST_DATABASE_URL set)
set -euo pipefail
BUILD=$1 SRC=$2
: "${AW_TEST_DATABASE_URL:?run through ctest (AW_TEST_DATABASE_URL)}"
WORK=$(mktemp -d /tmp/aw-package.XXXXXX)
DB=aw_package_example_$$
ADMIN_URL=$AW_TEST_DATABASE_URL
cleanup() {
  psql -X -q "$ADMIN_URL" -c "drop database if exists $DB" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "package_example: $*" >&2; exit 1; }

# docs/embedding.md shows the example as it is.
awk '/^<!-- embedded example: examples\/embedded\/main.cpp -->$/ { found = 1; next }
     found && /^```cpp$/ { inside = 1; next }
     inside && /^```$/ { exit }
     inside { print }' "$SRC/docs/embedding.md" >"$WORK/readme-example.cpp"
diff -u "$SRC/examples/embedded/main.cpp" "$WORK/readme-example.cpp" >"$WORK/readme.diff" \
  || { cat "$WORK/readme.diff"; fail "docs/embedding.md's example differs from examples/embedded/main.cpp"; }

PREFIX=$WORK/prefix
cmake --install "$BUILD" --prefix "$PREFIX" >"$WORK/install.log" || { cat "$WORK/install.log"; fail "cmake --install failed"; }
for f in include/actor_worker/app/runtime.hpp include/actor_worker/config/config.hpp \
         lib/cmake/actor_worker/actor_workerConfig.cmake lib/pkgconfig/actor_worker.pc \
         lib/systemd/system/actor-worker.service bin/actor-worker \
         share/actor_worker/migrations/001_baseline.sql share/actor_worker/functions/actor_worker_claim.sql; do
  [ -e "$PREFIX/$f" ] || fail "not installed: $f"
done
[ ! -e "$PREFIX/include/actor_worker/app/cli" ] || fail "the binary's private headers were installed"

# The example, against the installed package only.
LAUNCHER=()
command -v ccache >/dev/null 2>&1 && LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$SRC/examples/embedded" -B "$WORK/shop" -DCMAKE_PREFIX_PATH="$PREFIX" \
      -DCMAKE_BUILD_TYPE=Release "${LAUNCHER[@]}" >"$WORK/configure.log" 2>&1 \
  || { cat "$WORK/configure.log"; fail "configuring the example against the package failed"; }
cmake --build "$WORK/shop" >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; fail "building the example failed"; }

psql -X -q "$ADMIN_URL" -c "create database $DB" >/dev/null
URL=${ADMIN_URL%/*}/$DB
DATABASE_URL=$URL SHOP_WAIT_SECONDS=60 "$WORK/shop/shop" | tee "$WORK/shop.out"
grep -q '^OK: email sent 1, completion hook 1, audit entry committed' "$WORK/shop.out" \
  || fail "the example did not report its handler, hook and follow-up"
# The same, seen from the database: the email job completed and its
# follow-up committed.
[ "$(psql -X -At "$URL" -c "select count(*) from jobs_live where kind = 'welcome_email' and state = 'completed'")" = 1 ] \
  || fail "the welcome_email job is not completed in the database"
[ "$(psql -X -At "$URL" -c "select count(*) from shop_audit")" = 1 ] || fail "no audit entry"
# Without a database URL the example must say so and exit 2.
rc=0; env -u DATABASE_URL "$WORK/shop/shop" >"$WORK/nourl.out" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q "no database URL" "$WORK/nourl.out" || { cat "$WORK/nourl.out"; fail "an empty URL was not rejected (exit $rc)"; }

# pkg-config alone: compile and link a program that resolves a config.
cat >"$WORK/pc.cpp" <<'CPP'
#include "actor_worker/config/config.hpp"
#include <iostream>
int main() {
  auto cfg = aw::parse_config("[worker]\nnode = \"pc\"\n", "inline.toml");
  std::cout << cfg.worker.node << "\n";
}
CPP
PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig
export PKG_CONFIG_PATH
# shellcheck disable=SC2046
g++ -o "$WORK/pc" "$WORK/pc.cpp" $(pkg-config --cflags --libs actor_worker) \
  || fail "building with pkg-config's flags failed"
[ "$("$WORK/pc")" = pc ] || fail "the pkg-config program printed the wrong node"

# The systemd unit runs the installed binary.
grep -q "^ExecStart=$PREFIX/bin/actor-worker " "$PREFIX/lib/systemd/system/actor-worker.service" \
  || fail "the systemd unit does not run $PREFIX/bin/actor-worker"
echo "package_example: OK"
