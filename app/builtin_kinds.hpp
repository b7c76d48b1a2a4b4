#pragma once
// Job kinds every actor-worker binary knows, so the binary is useful and
// testable on its own:
//   noop                                   completes at once (non-blocking:
//                                          runs inline, no thread hand-off)
//   sleep  {"ms": N}                       waits N ms on a timer (an
//                                          asynchronous handler: no thread
//                                          held), then completes; stops at
//                                          once when cancelled
//   fail   {"times": N, "terminal": bool, "message": "..."}
//          fails its first N attempts (counted by error_count), then
//          completes; without "times" it always fails; "terminal": true
//          sends it straight to the dead letter queue.
//   await_callback {"timeout": "30s"}      parks the job until its callback is
//          resolved (`actor-worker callback complete|fail|retry ID`) or the
//          timeout passes; the id is in `jobs show ID` (callback_id).
//   noop_tx                                a transactional handler
//          (registry::add_transactional) that does nothing: its job
//          completes in a transaction of its own (what the transactional
//          path costs: bench/transactional.sh)
//
// A test/diagnostic kind, registered only when a database URL is given (the
// `actor-worker run` binary does):
//   record {"ms": N}                       records the run, sleeps N ms
//          (default 0, stops at once when cancelled, then fails), records
//          that it finished, completes. Each run inserts a row
//            (job_id, attempt, worker = the job's locked_by at the start)
//          into `job_executions` over a connection of its own to the
//          worker's database, and sets that row's finished_at just before
//          returning. The table is not created by any migration: whoever
//          uses the kind creates it first (the fault tests do):
//            CREATE TABLE job_executions (
//              id          bigserial PRIMARY KEY,
//              job_id      bigint NOT NULL,
//              attempt     integer NOT NULL,
//              worker      text NOT NULL,
//              started_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
//              finished_at timestamptz);
//          Without the table the job fails terminally, saying so. Counting
//          these rows counts handler executions exactly (test/fault/).
//   record_tx {"ms": N}                    the same row, inserted (with
//          finished_at) by a transactional handler in the transaction that
//          commits the job's completion, then sleeps N ms in it (default
//          0): the row exists exactly when the job completed.

#include <string>

namespace aw {

class registry;

/// Registers noop, noop_tx, sleep, await_callback and fail in `reg`.
void register_builtin_kinds(registry& reg);

/// Registers those, and the test/diagnostic kinds `record` and
/// `record_tx`, which write to `job_executions` in the database at
/// `database_url` (record_tx in the run's own transaction).
void register_builtin_kinds(registry& reg, const std::string& database_url);

} // namespace aw
