# bench/peers/harness.sh - what the peer benchmarks (graphile_worker.sh, pgboss.sh) share, sourced
# by them after they set:
#   PEER_SCRIPT      their file name, for error messages
#   PEER_DB_PREFIX   the prefix of their databases (<prefix>_<config>_<pid>), dropped on exit in
#                    external mode
#   PEER_PACKAGE, PEER_VERSION   the npm package under test and its pinned version
# It finds the tools, installs the cleanup trap, starts the throwaway server (or checks the external
# one) and prints its settings, and installs the pinned npm packages into NODE_DIR, where it leaves
# the working directory. The knobs it reads are documented in the scripts that source it.
die() { echo "bench/peers/$PEER_SCRIPT: $*" >&2; exit 1; }

PORT=${PORT:-5499}
EXTERNAL=${BENCH_EXTERNAL_PG:-}
[ "$EXTERNAL" = 0 ] && EXTERNAL=
NODE_DIR=${NODE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/actor-worker-bench/node}
BASE=${TMPDIR:-/tmp}/aw-peerbench-$$
DATA=$BASE/data
LOG=$BASE/server.log
PG_VERSION=${PG_VERSION:-8.23.1}
NODE_BIN=${NODE_BIN:-node}   # the packages declare engines node>=22; they run on Node 20
export BENCH_PORT=$PORT BENCH_DB_SUFFIX=_$$

as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

# ---- tools ----------------------------------------------------------------------------------------
command -v "$NODE_BIN" >/dev/null 2>&1 ||
  die "'$NODE_BIN' not found: install Node.js (Debian packages: nodejs npm) or set NODE_BIN=/path/to/node"
if [ -z "${PGBIN:-}" ]; then
  if command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/psql" ]; then PGBIN=$(pg_config --bindir)
  else PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1); fi
fi
PSQL_BIN=$PGBIN/psql
[ -x "$PSQL_BIN" ] || PSQL_BIN=$(command -v psql || true)
[ -n "$PSQL_BIN" ] || die "psql not found (install postgresql-client, or set PGBIN)"
[ -n "$EXTERNAL" ] || [ -x "$PGBIN/initdb" ] ||
  die "no PostgreSQL server binaries (initdb) in '$PGBIN': install postgresql, set PGBIN, or use BENCH_EXTERNAL_PG=1"
PSQL=("$PSQL_BIN" -X -q -A -t -h 127.0.0.1 -p "$PORT" -U postgres -d postgres)

# ---- cleanup: the driver, our databases (external mode), the throwaway cluster -------------------
DRIVER_PID=
STARTED=
cleanup() {
  if [ -n "$DRIVER_PID" ]; then kill "$DRIVER_PID" 2>/dev/null || true; wait "$DRIVER_PID" 2>/dev/null || true; fi
  if [ -n "$EXTERNAL" ]; then   # a run cut short leaves its database behind; drop it
    "${PSQL[@]}" -c "select datname from pg_database where datname like '${PEER_DB_PREFIX}\\_%\\_$$'" 2>/dev/null |
      while read -r db; do [ -n "$db" ] && "${PSQL[@]}" -c "drop database if exists $db with (force)" >/dev/null 2>&1; done || true
  elif [ -n "$STARTED" ]; then
    as_pg "$PGBIN/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null 2>&1 || true
  fi
  if [ -z "$EXTERNAL" ] && [ -d "$BASE" ]; then
    if [ -n "${KEEP_DATA:-}" ]; then echo "# cluster dir kept: $BASE" >&2; else rm -rf "$BASE"; fi
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- server ---------------------------------------------------------------------------------------
if [ -n "$EXTERNAL" ]; then
  "${PSQL[@]}" -c 'select 1' >/dev/null 2>&1 ||
    die "BENCH_EXTERNAL_PG=1 but no server accepts user postgres on 127.0.0.1:$PORT"
  echo "# postgres: $("${PSQL[@]}" -c 'select version()')"
  echo "# settings (external server on 127.0.0.1:$PORT, used as it is):"
else
  if (exec 3<>/dev/tcp/127.0.0.1/"$PORT") 2>/dev/null; then
    die "port $PORT on 127.0.0.1 is already in use; refusing to start (set PORT=..., or BENCH_EXTERNAL_PG=1 to use that server)"
  fi
  mkdir -p "$BASE"
  [ "$(id -u)" = 0 ] && chown postgres "$BASE"     # the server (user postgres) puts its socket here
  as_pg "$PGBIN/initdb" -D "$DATA" -U postgres -A trust -E UTF8 >"$BASE/initdb.log" 2>&1 ||
    { cat "$BASE/initdb.log" >&2; die "initdb failed"; }
  STARTED=1
  as_pg "$PGBIN/pg_ctl" -D "$DATA" -l "$LOG" -w -o "-h 127.0.0.1 -p $PORT -k $BASE" start >/dev/null ||
    { tail -n 20 "$LOG" >&2; die "the server did not start"; }
  echo "# postgres: $("${PSQL[@]}" -c 'select version()')"
  echo "# settings (initdb defaults; only listen address, port and socket dir set on the command line):"
fi
"${PSQL[@]}" -F '=' -c "select name, current_setting(name) from pg_settings where name in
  ('shared_buffers','synchronous_commit','fsync','full_page_writes','wal_level','max_wal_size',
   'checkpoint_timeout','max_connections','work_mem','autovacuum') order by 1" | sed 's/^/#   /'

# ---- npm packages (pinned, installed once into NODE_DIR) ------------------------------------------
mkdir -p "$NODE_DIR"
cd "$NODE_DIR"
pkgver() { "$NODE_BIN" -e "try{console.log(JSON.parse(require('fs').readFileSync('node_modules/$1/package.json','utf8')).version)}catch(e){console.log('none')}"; }
exec 9>"$NODE_DIR/.install.lock"
flock 9                                # another bench script may be installing into the same dir
if [ "$(pkgver "$PEER_PACKAGE")" != "$PEER_VERSION" ] || [ "$(pkgver pg)" != "$PG_VERSION" ]; then
  command -v npm >/dev/null 2>&1 || die "npm not found: install it (Debian package: npm)"
  [ -f package.json ] || echo '{"name":"actor-worker-peer-bench","private":true}' > package.json
  echo "# installing $PEER_PACKAGE@$PEER_VERSION pg@$PG_VERSION into $NODE_DIR" >&2
  npm install --save-exact --no-audit --no-fund --loglevel=error "$PEER_PACKAGE@$PEER_VERSION" "pg@$PG_VERSION" >&2 ||
    die "npm install failed"
fi
flock -u 9
echo "# node $("$NODE_BIN" --version), $PEER_PACKAGE $(pkgver "$PEER_PACKAGE"), pg $(pkgver pg), cores $(nproc)"
