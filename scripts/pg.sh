#!/usr/bin/env bash
# Throwaway PostgreSQL clusters for the run command, the tests and the
# benchmark. Works as root (runs the server as user postgres) or as a
# normal user.
#
#   scripts/pg.sh start DIR PORT   initdb DIR if needed, start on 127.0.0.1:PORT
#                                  (PG_FRESH=1: start from an empty cluster)
#   scripts/pg.sh stop DIR         fast shutdown
#   scripts/pg.sh url PORT         the URL to connect to it
#
# Replication, for the failover tests (a primary started with `start`):
#
#   scripts/pg.sh standby DIR PORT PRIMARY_PORT
#                                  base backup of the primary on
#                                  127.0.0.1:PRIMARY_PORT into DIR (replacing
#                                  what is there), then start it on PORT as a
#                                  streaming hot standby (pg_basebackup -R)
#   scripts/pg.sh crash DIR        immediate shutdown (pg_ctl -m immediate):
#                                  no checkpoint, sessions cut, as a crash
#   scripts/pg.sh promote DIR      promote a standby to primary (waits)
#
# As root, when the postgres user cannot reach DIR (a checkout in root's
# mode-700 home, the first place a root user clones to), the cluster lives
# in /tmp/aw-pg-<hash of DIR> instead; start and stop agree on it.
set -euo pipefail

pgbin() {
  if command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ]; then
    pg_config --bindir
  else
    ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1
  fi
}

as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# Where the cluster of DIR really lives (see above).
cluster_dir() {
  local dir=$1
  if [ "$(id -u)" = 0 ]; then
    mkdir -p "$dir"
    if ! runuser -u postgres -- test -x "$dir" 2>/dev/null; then
      echo "/tmp/aw-pg-$(cd "$dir" && pwd -P | sha256sum | cut -c1-16)"
      return
    fi
  fi
  echo "$dir"
}

cmd=${1:-}
case "$cmd" in
  start)
    dir=$(cluster_dir "$2") port=$3
    bin=$(pgbin)
    [ -n "$bin" ] || { echo "pg.sh: no PostgreSQL server binaries found (apt-get install postgresql)" >&2; exit 1; }
    if [ -f "$dir/data/postmaster.pid" ] && as_pg "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
      # Already running (a previous run was interrupted): reuse it only on
      # the port asked for; never take over a server someone runs elsewhere.
      running_port=$(sed -n 4p "$dir/data/postmaster.pid")
      if [ "$running_port" != "$port" ]; then
        echo "pg.sh: a server already runs in $dir on port $running_port, not $port;" \
             "stop it (scripts/pg.sh stop $2) or use its port" >&2
        exit 1
      fi
      exit 0
    fi
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres "$dir"
    if [ -n "${PG_FRESH:-}" ]; then rm -rf "$dir/data"; fi
    if [ ! -f "$dir/data/PG_VERSION" ]; then
      as_pg "$bin/initdb" --no-sync -D "$dir/data" -U postgres -A trust -E UTF8 >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; exit 1; }
    fi
    as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-h 127.0.0.1 -p $port -k $dir -c max_connections=200" start >/dev/null \
      || { tail -n 20 "$dir/server.log" >&2; exit 1; }
    ;;
  stop)
    dir=$(cluster_dir "$2")
    bin=$(pgbin)
    [ -f "$dir/data/postmaster.pid" ] && as_pg "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    ;;
  url)
    echo "postgresql://postgres@127.0.0.1:$2/postgres"
    ;;
  standby)
    dir=$(cluster_dir "$2") port=$3 primary_port=$4
    bin=$(pgbin)
    [ -n "$bin" ] || { echo "pg.sh: no PostgreSQL server binaries found (apt-get install postgresql)" >&2; exit 1; }
    if [ -f "$dir/data/postmaster.pid" ] && as_pg "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
      echo "pg.sh: a server already runs in $dir; stop it first" >&2
      exit 1
    fi
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres "$dir"
    rm -rf "$dir/data"
    # -R: standby.signal and primary_conninfo (streaming from the primary);
    # -X stream: the WAL written during the copy comes along; -c fast: no
    # wait for the primary's next checkpoint.
    as_pg "$bin/pg_basebackup" -h 127.0.0.1 -p "$primary_port" -U postgres -D "$dir/data" \
      -R -X stream -c fast --no-sync >"$dir/basebackup.log" 2>&1 \
      || { cat "$dir/basebackup.log" >&2; exit 1; }
    as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-h 127.0.0.1 -p $port -k $dir -c max_connections=200" start >/dev/null \
      || { tail -n 20 "$dir/server.log" >&2; exit 1; }
    ;;
  crash)
    dir=$(cluster_dir "$2")
    bin=$(pgbin)
    [ -f "$dir/data/postmaster.pid" ] && as_pg "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    ;;
  promote)
    dir=$(cluster_dir "$2")
    bin=$(pgbin)
    as_pg "$bin/pg_ctl" -D "$dir/data" -w -t 60 promote >/dev/null \
      || { tail -n 20 "$dir/server.log" >&2; exit 1; }
    ;;
  *)
    echo "usage: pg.sh start DIR PORT | stop DIR | url PORT | standby DIR PORT PRIMARY_PORT | crash DIR | promote DIR" >&2
    exit 2
    ;;
esac
