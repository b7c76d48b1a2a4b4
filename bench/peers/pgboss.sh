#!/usr/bin/env bash
# bench/peers/pgboss.sh - end-to-end throughput of pg-boss on PostgreSQL, measured the same way as
# bench/run.sh measures actor-worker, so both can be put side by side (same machine, same session only).
#
# Shape of one run: fresh database -> pg-boss schema (boss.start) + createQueue('noop') with the
# default 'standard' policy -> N no-op jobs enqueued with ONE boss.insert('noop', [...]) call (pg-boss's
# bulk API) -> ANALYZE + CHECKPOINT -> P worker processes (child Node processes, each with its own
# PgBoss instance, pool max = localConcurrency + 2) -> boss.work('noop', {batchSize, localConcurrency,
# pollingIntervalSeconds: 0.5, burstWhenBatchFull: true}, noop-handler) -> time from "go" (the work()
# call) until no job of the queue is in a state below 'completed' (polled every POLL_MS) -> check every
# job's handler ran exactly once in total and N rows are 'completed' -> stop workers, drop database.
#
# Worker configs are "b<batchSize>x<localConcurrency>:<processes>", e.g. b100x4:1.
#   batchSize: jobs per fetch; the batch handler returning completes the whole batch in one query.
#   localConcurrency: independent fetch loops per process. burstWhenBatchFull: keep fetching with
#   no delay while fetches come back full (pg-boss >= 12; without it every loop sleeps the
#   polling interval, min 0.5 s, between fetches).
#
# Server: by default a throwaway cluster of its own (initdb defaults; as root initdb/pg_ctl run as
# user postgres) in ${TMPDIR:-/tmp}/aw-peerbench-<pid>, on 127.0.0.1:PORT; the script refuses a busy
# port, and always stops the cluster and removes its dir on exit (KEEP_DATA=1 keeps the dir).
# BENCH_EXTERNAL_PG=1: use the server already running on 127.0.0.1:PORT as user postgres (trust auth)
# instead; the script then only creates and drops its own databases (pgboss_*_<pid>) there.
#
# npm packages (pg-boss, pg; pinned) are installed from the npm registry into NODE_DIR when missing;
# the Node driver below is written there and run there with `node` from PATH.
#
# Env knobs:
#   N (200000)           jobs per run
#   REPS (1)             repetitions of every configuration (interleaved)
#   CONFIGS ("b100x4:1,b100x4:2,b500x2:1,b500x2:2")  b<batchSize>x<localConcurrency>:<processes>
#   CONCURRENCY          not used by pg-boss (its concurrency is the x<localConcurrency> of a config)
#   HOLD (0)             1: a session holds a transaction id open in another database of the server
#                        from before the backlog is inserted to the end of the drain; same: in the
#                        run's own database
#   PORT (5499)          port of the throwaway cluster (or of the external server)
#   BENCH_EXTERNAL_PG    set to 1 to use an already running server (see above)
#   PGBIN                PostgreSQL binaries (default: pg_config --bindir, else the newest
#                        /usr/lib/postgresql/*/bin; external mode needs only psql)
#   NODE_BIN (node)      Node binary;  NODE_DIR (${XDG_CACHE_HOME:-$HOME/.cache}/actor-worker-bench/node)
#   PGBOSS_VERSION (12.38.0), PG_VERSION (8.23.1)   npm package versions
#   POLL_MS (20)         drain poll period;  RUN_TIMEOUT_MS (600000) before a run is failed
#   KEEP_DATA            set to keep the throwaway cluster dir
#
# Output: "#" lines with the server version and settings, then per run a "#" line (enqueue rate,
# worker start-up, drain time), a "#   during drain: ..." line (WAL bytes/job, commits/job from
# pg_stat_database, worker-process CPU, machine-wide CPU busy %, load1 at start) and
#   RESULT pg-boss/<config>/p<procs>/run<k> jobs_per_sec=.. jobs=.. seconds=..
# then a summary and, as the last line, "RESULT pg-boss jobs_per_sec=.. jobs=.. seconds=.." for the
# best run of the first configuration.
set -euo pipefail

PEER_SCRIPT=pgboss.sh PEER_DB_PREFIX=pgboss PEER_PACKAGE=pg-boss
PGBOSS_VERSION=${PGBOSS_VERSION:-12.38.0}
PEER_VERSION=$PGBOSS_VERSION
export N=${N:-200000} REPS=${REPS:-1} POLL_MS=${POLL_MS:-20}
export CONFIGS=${CONFIGS:-b100x4:1,b100x4:2,b500x2:1,b500x2:2}
# shellcheck source=bench/peers/harness.sh
. "$(dirname "${BASH_SOURCE[0]}")/harness.sh"

# ---- benchmark driver (Node) ----------------------------------------------------------------------
# Written to a temporary name and renamed, so that a concurrent run never reads a half-written file.
cat > "$NODE_DIR/bench_pgboss.mjs.$$" <<'EOF'
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import os from "node:os";
import pg from "pg";

const PORT = process.env.BENCH_PORT || "5499";
const DB_SUFFIX = process.env.BENCH_DB_SUFFIX || "";
const N = Number(process.env.N || 200000);
const REPS = Number(process.env.REPS || 1);
const POLL_MS = Number(process.env.POLL_MS || 20);
const RUN_TIMEOUT_MS = Number(process.env.RUN_TIMEOUT_MS || 600000);
const QUEUE = "noop";
const url = (db) => `postgres://postgres@127.0.0.1:${PORT}/${db}`;
const now = () => Number(process.hrtime.bigint()) / 1e6;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// machine-wide CPU time (all processes, ours and anyone else's) in ms: [busy, total]
const machineCpu = () => os.cpus().reduce(([b, t], { times: x }) => {
  const all = x.user + x.nice + x.sys + x.idle + x.irq;
  return [b + all - x.idle, t + all];
}, [0, 0]);
// WAL position and committed transactions of this database (stats of exited backends are flushed)
const dbSnap = async (c) => (await c.query(
  "select pg_current_wal_lsn() as lsn, (select xact_commit from pg_stat_database where datname = current_database()) as xc",
)).rows[0];
const parseCfg = (s) => {
  const m = /^b(\d+)x(\d+)$/.exec(s);
  if (!m) throw new Error(`bad config ${s} (want b<batchSize>x<localConcurrency>)`);
  return { batchSize: Number(m[1]), localConcurrency: Number(m[2]) };
};

// ---- child: one worker process ----
async function child() {
  process.on("disconnect", () => process.exit(1)); // never outlive the driver
  const { PgBoss } = await import("pg-boss");
  const { db, cfg } = JSON.parse(process.env.PB_CHILD);
  const { batchSize, localConcurrency } = parseCfg(cfg);
  const boss = new PgBoss({ connectionString: url(db), max: localConcurrency + 2 });
  boss.on("error", (e) => console.error(`[pg-boss ${process.pid}] error: ${e.message}`));
  await boss.start();
  let executed = 0;
  let cpu0;
  process.on("message", async (msg) => {
    if (msg === "go") {
      cpu0 = process.cpuUsage();
      await boss.work(
        QUEUE,
        { batchSize, localConcurrency, pollingIntervalSeconds: 0.5, burstWhenBatchFull: true },
        async (jobs) => { executed += jobs.length; },
      );
      process.send("started");
    } else if (msg === "stop") {
      const cpu = process.cpuUsage(cpu0);
      await boss.stop({ graceful: true, timeout: 10000 });
      process.send({ executed, cpuMs: (cpu.user + cpu.system) / 1000 }, () => process.exit(0));
    }
  });
  process.send("ready");
}

function waitMsg(kid, want) {
  return new Promise((resolve, reject) => {
    const onMsg = (m) => { if (m === want) { kid.off("message", onMsg); resolve(now()); } };
    kid.on("message", onMsg);
    kid.once("exit", (code) => reject(new Error(`worker ${kid.pid} exited (${code}) before '${want}'`)));
  });
}

async function oneRun(cfg, procs, rep) {
  const db = `pgboss_${cfg}_p${procs}_r${rep}${DB_SUFFIX}`;
  const admin = new pg.Client({ connectionString: url("postgres") });
  await admin.connect();
  await admin.query(`drop database if exists ${db}`);
  await admin.query(`create database ${db}`);

  // HOLD=1 (another database of the server) or HOLD=same (the run's own
  // database): a session holds a transaction (with an xid) open from
  // before the backlog is inserted to the end of the drain.
  let holder = null;
  if (process.env.HOLD === "1" || process.env.HOLD === "same") {
    holder = new pg.Client({ connectionString: url(process.env.HOLD === "same" ? db : "postgres") });
    await holder.connect();
    await holder.query("begin");
    await holder.query("select txid_current()");
  }
  const { PgBoss } = await import("pg-boss");
  const boss = new PgBoss({ connectionString: url(db), max: 2 });
  boss.on("error", (e) => console.error(`[pg-boss driver] error: ${e.message}`));
  await boss.start();
  await boss.createQueue(QUEUE);
  const jobs = Array.from({ length: N }, (_, i) => ({ data: { id: i } }));
  const tq = now();
  await boss.insert(QUEUE, jobs);
  const enqMs = now() - tq;
  await boss.stop({ graceful: false });

  const c = new pg.Client({ connectionString: url(db) });
  await c.connect();
  const queued = Number((await c.query("select count(*) from pgboss.job where name = $1 and state = 'created'", [QUEUE])).rows[0].count);
  if (queued !== N) throw new Error(`expected ${N} queued jobs, found ${queued}`);
  await c.query("analyze pgboss.job");
  await c.query("checkpoint");

  const kids = [];
  for (let i = 0; i < procs; i++) {
    kids.push(fork(fileURLToPath(import.meta.url), ["child"], { env: { ...process.env, PB_CHILD: JSON.stringify({ db, cfg }) } }));
  }
  await Promise.all(kids.map((k) => waitMsg(k, "ready")));
  const started = kids.map((k) => waitMsg(k, "started"));
  const load = os.loadavg()[0];
  const snap0 = await dbSnap(c);
  const mc0 = machineCpu();
  const t0 = now();
  kids.forEach((k) => k.send("go"));
  let polls = 0;
  for (;;) {
    const { rows } = await c.query("select exists(select 1 from pgboss.job where name = $1 and state < 'completed') as e", [QUEUE]);
    polls++;
    if (!rows[0].e) break;
    if (now() - t0 > RUN_TIMEOUT_MS) {
      kids.forEach((k) => k.kill("SIGKILL"));
      throw new Error(`run timed out after ${RUN_TIMEOUT_MS} ms`);
    }
    await sleep(POLL_MS);
  }
  const sec = (now() - t0) / 1000;
  const mc1 = machineCpu();
  const machineBusy = (100 * (mc1[0] - mc0[0])) / (mc1[1] - mc0[1]);
  const startupMs = Math.max(...(await Promise.all(started))) - t0;
  const reports = kids.map((k) => new Promise((r) => k.on("message", (m) => m && m.executed !== undefined && r(m))));
  const exits = kids.map((k) => new Promise((r) => k.once("exit", r)));
  kids.forEach((k) => k.send("stop"));
  const reps = await Promise.all(reports);
  const executed = reps.reduce((a, r) => a + r.executed, 0);
  const workerCpuS = reps.reduce((a, r) => a + r.cpuMs, 0) / 1000;
  await Promise.all(exits);
  if (holder) {
    await holder.query("rollback");
    await holder.end();
  }
  await c.end(); // our backend exits and flushes its stats; so do the workers' ones
  await sleep(500);
  const c2 = new pg.Client({ connectionString: url(db) });
  await c2.connect();
  const snap1 = await dbSnap(c2);
  const walBytes = Number((await c2.query("select pg_wal_lsn_diff($1, $2) as d", [snap1.lsn, snap0.lsn])).rows[0].d);
  const commits = Number(snap1.xc) - Number(snap0.xc) - polls - 1; // minus our own poll/snapshot queries
  const completed = Number((await c2.query("select count(*) from pgboss.job where name = $1 and state = 'completed'", [QUEUE])).rows[0].count);
  if (executed !== N || completed !== N) throw new Error(`workers report ${executed} executions, ${completed} completed rows; expected ${N}`);
  await c2.end();
  await admin.query(`drop database ${db}`);
  await admin.end();
  const jps = N / sec;
  console.log(
    `# pg-boss ${cfg} procs=${procs} run=${rep} hold=${process.env.HOLD || "0"}: enqueue ${N} in ${(enqMs / 1000).toFixed(3)}s (${Math.round(N / (enqMs / 1000))} jobs/s); ` +
      `workers up after ${startupMs.toFixed(0)}ms; drained in ${sec.toFixed(3)}s (${polls} polls, ${executed} handler executions)`,
  );
  console.log(
    `#   during drain: WAL ${(walBytes / 1e6).toFixed(1)} MB (${Math.round(walBytes / N)} B/job); commits ~${commits} (${(commits / N).toFixed(3)}/job); ` +
      `worker-process CPU ${workerCpuS.toFixed(2)} s (${(100 * workerCpuS / sec).toFixed(0)}% of one core); ` +
      `machine CPU busy ${machineBusy.toFixed(0)}% of ${os.cpus().length} cores (all processes); load1 at start ${load.toFixed(2)}`,
  );
  console.log(`RESULT pg-boss/${cfg}/p${procs}/run${rep} jobs_per_sec=${Math.round(jps)} jobs=${N} seconds=${sec.toFixed(3)}`);
  return { cfg, procs, rep, jps, sec };
}

async function main() {
  const configs = (process.env.CONFIGS || "b100x4:1,b100x4:2,b500x2:1,b500x2:2").split(",").map((s) => {
    const [cfg, p] = s.trim().split(":");
    parseCfg(cfg);
    const procs = Number(p || 1);
    if (!(Number.isInteger(procs) && procs >= 1)) throw new Error(`bad process count in ${s}`);
    return { cfg, procs };
  });
  const results = [];
  for (let rep = 1; rep <= REPS; rep++) for (const { cfg, procs } of configs) results.push(await oneRun(cfg, procs, rep));
  console.log("# summary (jobs/s per run):");
  for (const { cfg, procs } of configs) {
    const rs = results.filter((r) => r.cfg === cfg && r.procs === procs);
    console.log(`#   ${cfg.padEnd(8)} procs=${procs}: ${rs.map((r) => Math.round(r.jps)).join(", ")}`);
  }
  const head = results.filter((r) => r.cfg === configs[0].cfg && r.procs === configs[0].procs);
  const best = head.reduce((a, b) => (b.jps > a.jps ? b : a));
  console.log(`RESULT pg-boss jobs_per_sec=${Math.round(best.jps)} jobs=${N} seconds=${best.sec.toFixed(3)}`);
}

if (process.argv[2] === "child") child();
else main().catch((e) => { console.error(e); process.exit(1); });
EOF
mv -f "$NODE_DIR/bench_pgboss.mjs.$$" "$NODE_DIR/bench_pgboss.mjs"

# Run in the background and wait, so that INT/TERM reach the traps (and the cleanup) at once.
rc=0
"$NODE_BIN" "$NODE_DIR/bench_pgboss.mjs" &
DRIVER_PID=$!
wait "$DRIVER_PID" || rc=$?
DRIVER_PID=
exit "$rc"
