#!/usr/bin/env bash
# scripts/pg.sh where the checkout is out of the postgres user's reach (a
# directory of mode 700 owned by root, as root's home is; as root only),
# and a server that already runs in the directory on another port.
#   pg_sh_test.sh PG_SH PORT
set -euo pipefail
pg_sh=$1 port=$2
# As another user the server runs as that user, who can reach its own
# mode-700 directory: the same steps then check the port handling only.
home=$(mktemp -d /tmp/aw-home700.XXXXXX)
trap '"$pg_sh" stop "$home/checkout/build/test-pg" || true; rm -rf "$home"' EXIT
chmod 700 "$home"
mkdir -p "$home/checkout/build"
dir=$home/checkout/build/test-pg
PG_FRESH=1 "$pg_sh" start "$dir" "$port"
url=$("$pg_sh" url "$port")
[ "$(psql "$url" -Atc 'SELECT 1')" = 1 ] || { echo "FAIL: no server on $port"; exit 1; }
# The same directory on another port: refused, and the server left alone.
if out=$("$pg_sh" start "$dir" $((port + 1)) 2>&1); then
  echo "FAIL: a second start on another port succeeded"; exit 1
fi
case "$out" in
  *"already runs"*"on port $port, not $((port + 1))"*) ;;
  *) echo "FAIL: unclear message: $out"; exit 1 ;;
esac
[ "$(psql "$url" -Atc 'SELECT 1')" = 1 ] || { echo "FAIL: the server was touched"; exit 1; }
"$pg_sh" stop "$dir"
if psql "$url" -Atc 'SELECT 1' >/dev/null 2>&1; then
  echo "FAIL: still running after stop"; exit 1
fi
echo "pg_sh_test: ok"
