#!/usr/bin/env bash
# bench/latency.sh - pickup latency and bulk enqueue on a throwaway
# PostgreSQL with default settings:
#
#   1. latency: an embedded worker (bench/tools/latency.cpp: shipped
#      defaults, concurrency CONCURRENCY, so capacity stays idle) while
#      producers commit RATE single-job transactions per second for
#      SECONDS seconds: commit -> handler start p50 / p95 / p99 / max.
#   2. enqueue: aw::enqueue_many from one client, ENQUEUE_N jobs in
#      transactions of ENQUEUE_BATCH (bench/tools/enqueue.cpp): jobs/s, as
#      rows and as packs (bulk_layout::packed);
#      then the server's floors for the same transactions: pgbench, one
#      client, the jobs generated inside the server (no client data),
#      through the `jobs` view and into a bare table.
#   3. what the row costs: the same client batches, through enqueue_many
#      itself (into job_rows' current lane partition) and, as its bulk
#      statement (aw-bench-enqueue --table), into narrow tables (id, kind, queue, priority, args, ready_xid) with
#      the primary key and the lane index, the lane index only, the
#      primary key only, and no index: how fast a client can enqueue into
#      a row that can still be claimed in order, on this machine; and
#      into "packs" (aw-bench-enqueue --packs): one row per batch, kinds
#      and args as checked arrays, ids as one block per pack or one
#      sequence value per job (bench/results/2026-12-02-packed-enqueue.md).
#
#   bench/latency.sh
#   RATE=1000 SECONDS_=30 bench/latency.sh
#
# Knobs: RATE (500), SECONDS_ (20), WARMUP (2), CONCURRENCY (10), PRODUCERS
# (2), ENQUEUE_N (1000000), ENQUEUE_BATCH (1000), REPS (3: the enqueue runs
# this often, best reported), PORT (5495), PGDIR, BUILD_DIR.
# Output: the tools' RESULT lines:
#   RESULT latency jobs=.. p50_ms=.. p95_ms=.. p99_ms=.. max_ms=..
#   RESULT enqueue_many/runN jobs=.. batch=.. seconds=.. jobs_per_sec=..
#   RESULT enqueue_many/packed/runN jobs=.. batch=.. seconds=.. jobs_per_sec=..
#   RESULT enqueue_floor/jobs_view jobs=.. batch=.. jobs_per_sec=..
#   RESULT enqueue_arrays/TABLE jobs=.. batch=.. seconds=.. jobs_per_sec=..
#   RESULT enqueue_floor/bare_table jobs=.. batch=.. jobs_per_sec=..
#   RESULT enqueue_packed/packs/IDS/runN jobs=.. batch=.. seconds=.. jobs_per_sec=..
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
SCRIPT=latency.sh
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"
RATE=${RATE:-500}
SECONDS_=${SECONDS_:-20}
WARMUP=${WARMUP:-2}
CONCURRENCY=${CONCURRENCY:-10}
PRODUCERS=${PRODUCERS:-2}
ENQUEUE_N=${ENQUEUE_N:-1000000}
ENQUEUE_BATCH=${ENQUEUE_BATCH:-1000}
REPS=${REPS:-3}
PORT=${PORT:-5495}

"$ROOT/scripts/install-deps.sh"
bench_build aw-bench-latency aw-bench-enqueue
bench_start_pg
echo "# latency.sh: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores; $(sql postgres -c 'select version()' | cut -d, -f1)"

sql postgres -c "create database latency"
"$BIN" migrate --database-url "postgresql://postgres@127.0.0.1:$PORT/latency" --log-level warn
"$TOOLS/aw-bench-latency" --url "postgresql://postgres@127.0.0.1:$PORT/latency" \
  --rate "$RATE" --seconds "$SECONDS_" --warmup "$WARMUP" \
  --concurrency "$CONCURRENCY" --producers "$PRODUCERS"

for ((rep = 1; rep <= REPS; rep++)); do
  sql postgres -c "drop database if exists enqueue" -c "create database enqueue"
  "$BIN" migrate --database-url "postgresql://postgres@127.0.0.1:$PORT/enqueue" --log-level warn
  sql enqueue -c "checkpoint"
  "$TOOLS/aw-bench-enqueue" --url "postgresql://postgres@127.0.0.1:$PORT/enqueue" \
    --jobs "$ENQUEUE_N" --batch "$ENQUEUE_BATCH" | sed "s/^RESULT enqueue_many /RESULT enqueue_many\/run$rep /"
  [ "$(sql enqueue -c "select count(*) from job_rows")" = "$ENQUEUE_N" ] \
    || die "expected $ENQUEUE_N jobs in the table"
  # The same with bulk_layout::packed: one pack per transaction.
  sql postgres -c "drop database if exists enqueue" -c "create database enqueue"
  "$BIN" migrate --database-url "postgresql://postgres@127.0.0.1:$PORT/enqueue" --log-level warn
  sql enqueue -c "checkpoint"
  "$TOOLS/aw-bench-enqueue" --url "postgresql://postgres@127.0.0.1:$PORT/enqueue" \
    --jobs "$ENQUEUE_N" --batch "$ENQUEUE_BATCH" --layout packed \
    | sed "s/^RESULT enqueue_many\/packed /RESULT enqueue_many\/packed\/run$rep /"
  [ "$(sql enqueue -c "select coalesce(sum(n), 0) from job_packs")" = "$ENQUEUE_N" ] \
    || die "expected $ENQUEUE_N packed jobs"
done

# The server's own floor for the same inserts: pgbench commits transactions
# of ENQUEUE_BATCH jobs generated inside the server (INSERT INTO jobs ...
# SELECT FROM generate_series, no client data at all), one client. No
# client library can enqueue faster than this on this machine.
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)
PGBENCH=$(command -v pgbench || echo "$PGBIN/pgbench")
[ -x "$PGBENCH" ] || die "pgbench not found (Debian: postgresql-15 ships it in $PGBIN)"
FLOOR_SQL=$(mktemp /tmp/aw-latency-floor.XXXXXX.sql)
BENCH_CLEANUP+=("rm -f '$FLOOR_SQL'")
floor() {  # floor NAME SQL: jobs/s of pgbench committing SQL, ENQUEUE_N / ENQUEUE_BATCH times
  local tps
  echo "$2" >"$FLOOR_SQL"
  sql postgres -c "drop database if exists enqueue" -c "create database enqueue"
  "$BIN" migrate --database-url "postgresql://postgres@127.0.0.1:$PORT/enqueue" --log-level warn
  sql enqueue -c "create table bare_jobs (id bigint generated by default as identity primary key,
                                          kind text not null, args jsonb not null)" -c "checkpoint"
  tps=$("$PGBENCH" -n -h 127.0.0.1 -p "$PORT" -U postgres -c 1 -t "$((ENQUEUE_N / ENQUEUE_BATCH))" \
          -f "$FLOOR_SQL" enqueue 2>&1 | sed -n 's/^tps = \([0-9.]*\).*/\1/p' | head -n1)
  [ -n "$tps" ] || die "cannot read pgbench's tps"
  echo "RESULT enqueue_floor/$1 jobs=$((ENQUEUE_N / ENQUEUE_BATCH * ENQUEUE_BATCH)) batch=$ENQUEUE_BATCH jobs_per_sec=$(gawk -v t="$tps" -v b="$ENQUEUE_BATCH" 'BEGIN { printf "%.0f", t * b }')"
}
# Through the SQL contract, as any producer would.
floor jobs_view "insert into jobs (kind, args) select 'noop', jsonb_build_object('n', g) from generate_series(1, $ENQUEUE_BATCH) as g;"
# A bare table (id, kind, args; no other index, trigger or view): what the
# disk and one backend allow any queue.
floor bare_table "insert into bare_jobs (kind, args) select 'noop', jsonb_build_object('n', g) from generate_series(1, $ENQUEUE_BATCH) as g;"

# ---- 3. what the row costs -----------------------------------------------------------------------
# The client batches of section 2, as enqueue_many's bulk statement, into
# tables of other shapes beside a migrated job_rows (in turns, REPS times).
sql postgres -c "drop database if exists rows" -c "create database rows"
"$BIN" migrate --database-url "postgresql://postgres@127.0.0.1:$PORT/rows" --log-level warn
narrow() {  # narrow NAME INDEXES...: a narrow lane row with the given indexes
  local name=$1 idx
  shift
  sql rows -c "create table $name (id bigint generated by default as identity,
                                  kind text not null, queue text not null,
                                  priority integer not null, args jsonb not null,
                                  ready_xid xid8 not null)"
  for idx in "$@"; do sql rows -c "create index on $name $idx"; done
}
narrow narrow_pk_lane "(id)" "(queue, priority, ready_xid, id)"
# A pack: one row per batch, the jobs' kinds and args as arrays, checked
# as job_rows checks each row (bench/results/2026-12-02-packed-enqueue.md).
sql rows -c "create function pack_checked(kinds text[], args jsonb[]) returns boolean
               language sql immutable as \$\$
               select not exists (select 1 from unnest(kinds, args) as e(kind, args)
                                   where e.kind = '' or octet_length(e.kind) > 200
                                      or e.kind ~ '[[:cntrl:]]'
                                      or jsonb_typeof(e.args) <> 'object') \$\$" \
         -c "create sequence packs_blocks start 4503599627370496 increment 1024" \
         -c "create sequence packs_ids" \
         -c "create table packs (queue text not null, priority integer not null,
                                 ready_xid xid8 not null, first_id bigint, ids bigint[],
                                 n integer not null, kinds text[] not null,
                                 args jsonb[] not null,
                                 created_at timestamptz not null default now(),
                                 check (cardinality(kinds) = n and cardinality(args) = n),
                                 check (pack_checked(kinds, args)))" \
         -c "create index on packs (queue, priority, ready_xid, coalesce(first_id, ids[1]))"
narrow narrow_lane "(queue, priority, ready_xid, id)"
narrow narrow_pk "(id)"
narrow narrow_heap
for ((rep = 1; rep <= REPS; rep++)); do
  for table in job_rows narrow_pk_lane narrow_lane narrow_pk narrow_heap packs/block packs/per_job; do
    sql rows -c "truncate ${table%/*}" -c "checkpoint"
    if [ "${table%/*}" = packs ]; then
      "$TOOLS/aw-bench-enqueue" --url "postgresql://postgres@127.0.0.1:$PORT/rows" \
        --jobs "$ENQUEUE_N" --batch "$ENQUEUE_BATCH" --packs packs --ids "${table#*/}" \
        | sed "s/^\(RESULT [^ ]*\) /\1\/run$rep /"
    elif [ "$table" = job_rows ]; then
      # enqueue_many itself: into the current lane partition (migration 019).
      "$TOOLS/aw-bench-enqueue" --url "postgresql://postgres@127.0.0.1:$PORT/rows" \
        --jobs "$ENQUEUE_N" --batch "$ENQUEUE_BATCH" \
        | sed "s/^RESULT enqueue_many /RESULT enqueue_arrays\/job_rows\/run$rep /"
    else
      "$TOOLS/aw-bench-enqueue" --url "postgresql://postgres@127.0.0.1:$PORT/rows" \
        --jobs "$ENQUEUE_N" --batch "$ENQUEUE_BATCH" --table "$table" \
        | sed "s/^RESULT enqueue_arrays\/$table /RESULT enqueue_arrays\/$table\/run$rep /"
    fi
  done
done
