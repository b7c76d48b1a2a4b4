#!/usr/bin/env bash
# docs/patroni/demo.sh - actor-worker on a Patroni cluster, through a
# crash of the primary, on one machine (docs/failover.md). A manual run,
# not a CI test: test/fault/failover_test.cpp is the automated proof.
#
#   apt-get install -y patroni etcd-server postgresql   # Debian 12
#   docs/patroni/demo.sh [path/to/actor-worker]         # default: build/actor-worker
#
# What it does (everything in /tmp/aw-patroni, removed at the end unless
# KEEP=1):
#   1. one etcd member on 127.0.0.1:2479;
#   2. Patroni nodes pg1 (PostgreSQL on 5441) and pg2 (5442) with
#      docs/patroni/pg1.yml and pg2.yml: pg1 bootstraps and leads, pg2
#      clones it and becomes the synchronous standby (synchronous_mode);
#   3. `actor-worker migrate`, two workers (`run`), and a producer that
#      commits 5 `record` jobs every 100 ms, all on the multi-host URL
#        postgresql://postgres@127.0.0.1:5441,127.0.0.1:5442/postgres?target_session_attrs=read-write
#   4. the primary's machine "crashes": its Patroni is killed (-9) and its
#      PostgreSQL stopped with -m immediate. Patroni on pg2 promotes it when
#      the leader key expires (ttl 10 s);
#   5. measures when both workers complete jobs again, stops the producer,
#      waits for the queue to drain, restarts pg1's Patroni (it rejoins as
#      the standby, pg_rewind), and checks: no worker exited, every job
#      whose enqueue was acknowledged completed, and how many ran twice.
# Ports: etcd 2479/2480, PostgreSQL 5441/5442, Patroni REST 8041/8042.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BIN=${1:-$ROOT/build/actor-worker}
WORK=/tmp/aw-patroni
URL="postgresql://postgres@127.0.0.1:5441,127.0.0.1:5442/postgres?target_session_attrs=read-write"
PSQL=(psql -X -q -A -t -v ON_ERROR_STOP=1)

die() { echo "demo.sh: $*" >&2; exit 1; }
say() { echo "demo.sh: $(date -u +%T.%3N) $*"; }
[ -x "$BIN" ] || die "no actor-worker binary at $BIN (build it, or pass its path)"
command -v patroni >/dev/null || die "patroni is not installed (apt-get install patroni)"
command -v etcd >/dev/null || die "etcd is not installed (apt-get install etcd-server)"
for port in 2479 2480 5441 5442 8041 8042; do
  if (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null; then die "port $port is in use"; fi
done
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
# For background processes: becomes the command (no runuser in between),
# so $! is the process to kill.
exec_as_pg() {
  if [ "$(id -u)" = 0 ]; then
    HOME=/var/lib/postgresql exec setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"
  fi
  exec "$@"
}

PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  sleep 1
  for n in 1 2; do
    [ -f "$WORK/pg$n/data/postmaster.pid" ] \
      && as_pg /usr/lib/postgresql/15/bin/pg_ctl -D "$WORK/pg$n/data" -m immediate stop >/dev/null 2>&1 || true
  done
  for pid in "${PIDS[@]}"; do kill -9 "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

rm -rf "$WORK"
mkdir -p "$WORK/pg1" "$WORK/pg2" "$WORK/etcd"
[ "$(id -u)" = 0 ] && chown -R postgres "$WORK"
chmod 700 "$WORK/pg1" "$WORK/pg2"

say "starting etcd"
(exec_as_pg etcd --name aw-demo --data-dir "$WORK/etcd" \
  --listen-client-urls http://127.0.0.1:2479 --advertise-client-urls http://127.0.0.1:2479 \
  --listen-peer-urls http://127.0.0.1:2480 --initial-advertise-peer-urls http://127.0.0.1:2480 \
  --initial-cluster aw-demo=http://127.0.0.1:2480 --initial-cluster-state new \
  >"$WORK/etcd.log" 2>&1) &
PIDS+=($!)
for _ in $(seq 100); do curl -fsS http://127.0.0.1:2479/health >/dev/null 2>&1 && break; sleep 0.1; done
curl -fsS http://127.0.0.1:2479/health >/dev/null || die "etcd did not start: $(tail -5 "$WORK/etcd.log")"

start_patroni() {
  (exec_as_pg patroni "$HERE/pg$1.yml" >>"$WORK/patroni-pg$1.log" 2>&1) &
  PATRONI_PID[$1]=$!
  PIDS+=($!)
}
# Role of node $1 as its REST API reports it ("primary", "replica", ...).
role() { curl -fsS "http://127.0.0.1:804$1/patroni" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin).get("role",""))' 2>/dev/null || true; }
wait_for() { # seconds, description, command...
  local limit=$1 what=$2; shift 2
  local t0=$SECONDS
  until "$@"; do
    [ $((SECONDS - t0)) -lt "$limit" ] || die "timed out after ${limit}s waiting for $what"
    sleep 0.2
  done
}
declare -A PATRONI_PID
say "starting Patroni pg1 (bootstraps the cluster)"
start_patroni 1
is_primary() { [ "$(role "$1")" = primary ] || [ "$(role "$1")" = master ]; }
wait_for 90 "pg1 to lead" is_primary 1
say "starting Patroni pg2 (clones pg1, becomes the synchronous standby)"
start_patroni 2
sync_ok() {
  [ "$("${PSQL[@]}" -h 127.0.0.1 -p 5441 -U postgres -d postgres \
        -c "select string_agg(sync_state, ',') from pg_stat_replication" 2>/dev/null)" = sync ]
}
wait_for 120 "pg2 to be the synchronous standby" sync_ok
patronictl -c "$HERE/pg1.yml" list 2>/dev/null || true

say "migrating through the multi-host URL"
"$BIN" --database-url "$URL" migrate
"${PSQL[@]}" "$URL" -c "create table job_executions (id bigserial primary key, job_id bigint not null,
  attempt integer not null, worker text not null, started_at timestamptz not null default clock_timestamp(),
  finished_at timestamptz)"
for w in A B; do
  cat >"$WORK/worker-$w.toml" <<EOF
[worker]
node = "$w"
poll_interval = "500ms"
[queues.default]
concurrency = 10
EOF
  DATABASE_URL=$URL "$BIN" --config "$WORK/worker-$w.toml" run >"$WORK/worker-$w.log" 2>&1 &
  eval "WORKER_$w=$!"
  PIDS+=($!)
done

# The producer: 5 record jobs per transaction every 100 ms; the ids of
# acknowledged transactions (psql exited 0) go to acked.txt.
: >"$WORK/acked.txt"
(
  while [ ! -f "$WORK/stop-producer" ]; do
    ids=$("${PSQL[@]}" "$URL" -c "insert into jobs_in (kind, args) select 'record', '{\"ms\": 5}'
                                    from generate_series(1, 5) returning id" 2>/dev/null) \
      && echo "$ids" >>"$WORK/acked.txt"
    sleep 0.1
  done
) &
PIDS+=($!)

completed() { "${PSQL[@]}" "$URL" -c "select count(*) from jobs where state = 'completed'" 2>/dev/null || echo 0; }
steady() { [ "$(completed)" -ge 100 ]; }
wait_for 60 "100 completed jobs" steady
say "steady state: $(completed) jobs completed"

# The crash of pg1's machine: Patroni killed, PostgreSQL gone at once.
is_primary 1 || die "pg1 is not the primary: $(role 1)"
say "crash: kill -9 Patroni pg1, pg_ctl stop -m immediate on pg1"
t_crash=$EPOCHREALTIME
kill -9 "${PATRONI_PID[1]}"
wait "${PATRONI_PID[1]}" 2>/dev/null || true
as_pg /usr/lib/postgresql/15/bin/pg_ctl -D "$WORK/pg1/data" -m immediate stop >/dev/null
wait_for 60 "Patroni to promote pg2" is_primary 2
t_promoted=$EPOCHREALTIME
max_id=$("${PSQL[@]}" -h 127.0.0.1 -p 5442 -U postgres -d postgres -c "select coalesce(max(id), 0) from job_rows")
resumed() {
  [ "$("${PSQL[@]}" -h 127.0.0.1 -p 5442 -U postgres -d postgres -c \
      "select count(distinct split_part(locked_by, ':', 1)) from jobs where state = 'completed' and id > $max_id")" = 2 ]
}
wait_for 120 "both workers to complete jobs enqueued on the new primary" resumed
t_resumed=$EPOCHREALTIME
say "pg2 promoted $(awk -v a="$t_promoted" -v b="$t_crash" 'BEGIN { printf "%.1f", a - b }') s after the crash;" \
    "both workers completed new jobs $(awk -v a="$t_resumed" -v b="$t_promoted" 'BEGIN { printf "%.1f", a - b }') s after the promotion"

sleep 3
touch "$WORK/stop-producer"
sleep 0.5
say "pg1 comes back: its Patroni rejoins it as a standby (pg_rewind)"
start_patroni 1
drained() { [ "$("${PSQL[@]}" "$URL" -c "select count(*) from jobs where state <> 'completed'")" = 0 ]; }
wait_for 120 "the queue to drain" drained
is_replica_1() { [ "$(role 1)" = replica ]; }
wait_for 120 "pg1 to rejoin as a replica" is_replica_1
patronictl -c "$HERE/pg1.yml" list 2>/dev/null || true

acked=$(grep -c . "$WORK/acked.txt" || true)
missing=$(grep . "$WORK/acked.txt" | awk 'BEGIN { printf "select count(*) from (values " } { printf "%s(%s)", (NR > 1 ? "," : ""), $1 } END { print ") a(id) where not exists (select 1 from jobs j where j.id = a.id and j.state = '\''completed'\'')" }' \
  | "${PSQL[@]}" "$URL")
twice=$("${PSQL[@]}" "$URL" -c "select count(*) from (select job_id from job_executions group by job_id having count(*) > 1) d")
for w in A B; do
  pid_var="WORKER_$w"
  kill -0 "${!pid_var}" 2>/dev/null || die "worker $w exited: $(tail -5 "$WORK/worker-$w.log")"
done
say "acknowledged jobs: $acked; not completed: $missing; jobs that ran more than once: $twice; both workers still running"
[ "$missing" = 0 ] || die "acknowledged jobs were lost"
say "OK"
