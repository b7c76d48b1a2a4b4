#!/usr/bin/env bash
# bench/peers/graphile_worker.sh - end-to-end throughput of graphile-worker on PostgreSQL, measured the
# same way as bench/run.sh measures actor-worker, so both can be put side by side (same machine, same
# session only).
#
# Shape of one run: fresh database -> graphile-worker migrations -> N no-op jobs enqueued with ONE call
# to the bulk SQL function graphile_worker.add_jobs (what addJobs() defers to; same call as the
# project's own perfTest/init.js) -> ANALYZE + CHECKPOINT -> P worker processes (child Node processes,
# each running graphile-worker's library run() in-process with concurrentJobs=CONCURRENCY,
# maxPoolSize=CONCURRENCY+1) -> time from "go" until graphile_worker._private_jobs is empty (polled
# every POLL_MS) -> check every job's handler ran exactly once in total -> stop workers, drop database.
#
# Worker modes:
#   nobatch  localQueue.size=-1, completeJobBatchDelay=-1, failJobBatchDelay=-1   (library defaults)
#   batch    localQueue.size=500, completeJobBatchDelay=0, failJobBatchDelay=0    (docs/performance.md
#            "quick stats" / perfTest config)
#   batch250 localQueue.size=CONCURRENCY+1, completeJobBatchDelay=250, failJobBatchDelay=250 (docs'
#            suggested starting point: size = concurrency+1, 250 ms) - not in the default set
#
# Server: by default a throwaway cluster of its own (initdb defaults; as root initdb/pg_ctl run as
# user postgres) in ${TMPDIR:-/tmp}/aw-peerbench-<pid>, on 127.0.0.1:PORT; the script refuses a busy
# port, and always stops the cluster and removes its dir on exit (KEEP_DATA=1 keeps the dir).
# BENCH_EXTERNAL_PG=1: use the server already running on 127.0.0.1:PORT as user postgres (trust auth)
# instead; the script then only creates and drops its own databases (gw_*_<pid>) there.
#
# npm packages (graphile-worker, pg; pinned) are installed from the npm registry into NODE_DIR when
# missing; the Node driver below is written there and run there with `node` from PATH.
#
# Env knobs:
#   N (200000)           jobs per run
#   REPS (1)             repetitions of every configuration (interleaved)
#   CONFIGS ("nobatch:1,nobatch:2,batch:1,batch:2")  <mode>:<processes>, comma-separated
#   CONCURRENCY (24)     concurrentJobs per worker process
#   HOLD (0)             1: a session holds a transaction id open in another database of the server
#                        from before the backlog is inserted to the end of the drain; same: in the
#                        run's own database (an idle-in-transaction client, a long report)
#   PORT (5499)          port of the throwaway cluster (or of the external server)
#   BENCH_EXTERNAL_PG    set to 1 to use an already running server (see above)
#   PGBIN                PostgreSQL binaries (default: pg_config --bindir, else the newest
#                        /usr/lib/postgresql/*/bin; external mode needs only psql)
#   NODE_BIN (node)      Node binary;  NODE_DIR (${XDG_CACHE_HOME:-$HOME/.cache}/actor-worker-bench/node)
#   GW_VERSION (0.18.0), PG_VERSION (8.23.1)   npm package versions
#   POLL_MS (20)         drain poll period;  RUN_TIMEOUT_MS (600000) before a run is failed
#   KEEP_DATA            set to keep the throwaway cluster dir
#
# Output: "#" lines with the server version and settings, then per run a "#" line (enqueue rate,
# worker start-up, drain time), a "#   during drain: ..." line (WAL bytes/job, commits/job from
# pg_stat_database, worker-process CPU, machine-wide CPU busy %, load1 at start) and
#   RESULT graphile-worker/<mode>/p<procs>/run<k> jobs_per_sec=.. jobs=.. seconds=..
# then a summary and, as the last line, "RESULT graphile-worker jobs_per_sec=.. jobs=.. seconds=.."
# for the best batch:1 run (the best run overall if batch:1 was not run).
set -euo pipefail

PEER_SCRIPT=graphile_worker.sh PEER_DB_PREFIX=gw PEER_PACKAGE=graphile-worker
GW_VERSION=${GW_VERSION:-0.18.0}
PEER_VERSION=$GW_VERSION
export N=${N:-200000} REPS=${REPS:-1} CONCURRENCY=${CONCURRENCY:-24} POLL_MS=${POLL_MS:-20}
export CONFIGS=${CONFIGS:-nobatch:1,nobatch:2,batch:1,batch:2}
# shellcheck source=bench/peers/harness.sh
. "$(dirname "${BASH_SOURCE[0]}")/harness.sh"

# ---- benchmark driver (Node) ----------------------------------------------------------------------
# Written to a temporary name and renamed, so that a concurrent run never reads a half-written file.
cat > "$NODE_DIR/bench_graphile_worker.mjs.$$" <<'EOF'
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import os from "node:os";
import pg from "pg";

const PORT = process.env.BENCH_PORT || "5499";
const DB_SUFFIX = process.env.BENCH_DB_SUFFIX || "";
const N = Number(process.env.N || 200000);
const REPS = Number(process.env.REPS || 1);
const CONC = Number(process.env.CONCURRENCY || 24);
const POLL_MS = Number(process.env.POLL_MS || 20);
const RUN_TIMEOUT_MS = Number(process.env.RUN_TIMEOUT_MS || 600000);
const url = (db) => `postgres://postgres@127.0.0.1:${PORT}/${db}`;
const MODES = {
  nobatch: { localQueue: { size: -1 }, completeJobBatchDelay: -1, failJobBatchDelay: -1 },
  batch: { localQueue: { size: 500 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 },
  batch250: { localQueue: { size: CONC + 1 }, completeJobBatchDelay: 250, failJobBatchDelay: 250 },
};
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

async function makeLogger() {
  const { Logger } = await import("graphile-worker");
  return new Logger(() => (level, message) => {
    if (level === "error" || level === "warning") console.error(`[gw ${process.pid}] ${level}: ${message}`);
  });
}

// ---- child: one worker process ----
async function child() {
  process.on("disconnect", () => process.exit(1)); // never outlive the driver
  const { run } = await import("graphile-worker");
  const logger = await makeLogger();
  const { db, mode } = JSON.parse(process.env.GW_CHILD);
  let runner;
  let executed = 0;
  let cpu0;
  process.on("message", async (msg) => {
    if (msg === "go") {
      cpu0 = process.cpuUsage();
      runner = await run({
        noHandleSignals: true,
        logger,
        taskList: { noop: async () => { executed++; } },
        preset: { worker: { connectionString: url(db), concurrentJobs: CONC, maxPoolSize: CONC + 1, ...MODES[mode] } },
      });
      process.send("started");
    } else if (msg === "stop") {
      const cpu = process.cpuUsage(cpu0);
      if (runner) await runner.stop();
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

async function oneRun(mode, procs, rep) {
  const db = `gw_${mode}_p${procs}_r${rep}${DB_SUFFIX}`;
  const admin = new pg.Client({ connectionString: url("postgres") });
  await admin.connect();
  await admin.query(`drop database if exists ${db}`);
  await admin.query(`create database ${db}`);
  const { runMigrations } = await import("graphile-worker");
  await runMigrations({ connectionString: url(db), logger: await makeLogger() });

  // HOLD=1 (another database of the server) or HOLD=same (the run's own
  // database): a session holds a transaction (with an xid) open from
  // before the backlog is inserted to the end of the drain, as an
  // idle-in-transaction client, a long report or a stuck batch job does.
  let holder = null;
  if (process.env.HOLD === "1" || process.env.HOLD === "same") {
    holder = new pg.Client({ connectionString: url(process.env.HOLD === "same" ? db : "postgres") });
    await holder.connect();
    await holder.query("begin");
    await holder.query("select txid_current()");
  }
  const c = new pg.Client({ connectionString: url(db) });
  await c.connect();
  const specs = JSON.stringify(Array.from({ length: N }, (_, i) => ({ identifier: "noop", payload: { id: i } })));
  const tq = now();
  await c.query(
    "select count(*) from graphile_worker.add_jobs(array(select json_populate_recordset(null::graphile_worker.job_spec, $1::json)))",
    [specs],
  );
  const enqMs = now() - tq;
  const queued = Number((await c.query("select count(*) from graphile_worker._private_jobs")).rows[0].count);
  if (queued !== N) throw new Error(`expected ${N} queued jobs, found ${queued}`);
  await c.query("analyze graphile_worker._private_jobs");
  await c.query("checkpoint");

  const kids = [];
  for (let i = 0; i < procs; i++) {
    kids.push(fork(fileURLToPath(import.meta.url), ["child"], { env: { ...process.env, GW_CHILD: JSON.stringify({ db, mode }) } }));
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
    const { rows } = await c.query("select exists(select 1 from graphile_worker._private_jobs) as e");
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
  if (executed !== N) throw new Error(`workers report ${executed} task executions, expected ${N}`);
  await c2.end();
  await admin.query(`drop database ${db}`);
  await admin.end();
  const jps = N / sec;
  console.log(
    `# graphile-worker mode=${mode} procs=${procs} concurrency=${CONC}/proc run=${rep} hold=${process.env.HOLD || "0"}: enqueue ${N} in ${(enqMs / 1000).toFixed(3)}s ` +
      `(${Math.round(N / (enqMs / 1000))} jobs/s); workers up after ${startupMs.toFixed(0)}ms; drained in ${sec.toFixed(3)}s (${polls} polls, ${executed} tasks executed)`,
  );
  console.log(
    `#   during drain: WAL ${(walBytes / 1e6).toFixed(1)} MB (${Math.round(walBytes / N)} B/job); commits ~${commits} (${(commits / N).toFixed(3)}/job); ` +
      `worker-process CPU ${workerCpuS.toFixed(2)} s (${(100 * workerCpuS / sec).toFixed(0)}% of one core); ` +
      `machine CPU busy ${machineBusy.toFixed(0)}% of ${os.cpus().length} cores (all processes); load1 at start ${load.toFixed(2)}`,
  );
  console.log(`RESULT graphile-worker/${mode}/p${procs}/run${rep} jobs_per_sec=${Math.round(jps)} jobs=${N} seconds=${sec.toFixed(3)}`);
  return { mode, procs, rep, jps, sec };
}

async function main() {
  const configs = (process.env.CONFIGS || "nobatch:1,nobatch:2,batch:1,batch:2").split(",").map((s) => {
    const [mode, p] = s.trim().split(":");
    if (!MODES[mode]) throw new Error(`unknown mode ${mode} (want nobatch, batch or batch250)`);
    const procs = Number(p || 1);
    if (!(Number.isInteger(procs) && procs >= 1)) throw new Error(`bad process count in ${s}`);
    return { mode, procs };
  });
  const results = [];
  for (let rep = 1; rep <= REPS; rep++) for (const { mode, procs } of configs) results.push(await oneRun(mode, procs, rep));
  console.log("# summary (jobs/s per run):");
  for (const { mode, procs } of configs) {
    const rs = results.filter((r) => r.mode === mode && r.procs === procs);
    console.log(`#   ${mode.padEnd(8)} procs=${procs}: ${rs.map((r) => Math.round(r.jps)).join(", ")}`);
  }
  const head = results.filter((r) => r.mode === "batch" && r.procs === 1);
  const best = (head.length ? head : results).reduce((a, b) => (b.jps > a.jps ? b : a));
  console.log(`RESULT graphile-worker jobs_per_sec=${Math.round(best.jps)} jobs=${N} seconds=${best.sec.toFixed(3)}`);
}

if (process.argv[2] === "child") child();
else main().catch((e) => { console.error(e); process.exit(1); });
EOF
mv -f "$NODE_DIR/bench_graphile_worker.mjs.$$" "$NODE_DIR/bench_graphile_worker.mjs"

# Run in the background and wait, so that INT/TERM reach the traps (and the cleanup) at once.
rc=0
NO_LOG_SUCCESS=1 "$NODE_BIN" "$NODE_DIR/bench_graphile_worker.mjs" &
DRIVER_PID=$!
wait "$DRIVER_PID" || rc=$?
DRIVER_PID=
exit "$rc"
