// job_store::transact and its steps: the handlers of a transactional group
// run in one transaction, each in a savepoint, and their outcomes commit
// together (docs/transactional.md). Split from storage/job_store.cpp.

#include "actor_worker/storage/job_store.hpp"

#include <algorithm>
#include <cstddef>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>

#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <pqxx/pqxx>

#include "actor_worker/config/defaults.hpp"
#include "actor_worker/config/seconds.hpp"
#include "actor_worker/messages/outcome.hpp"
#include "actor_worker/storage/internal/job_store_parts.hpp"
#include "sql_statements.hpp"

namespace aw::storage {

// -- transactional groups --------------------------------------------------------
// job_store::transact: the handlers of a group run in one transaction, each
// in a savepoint, and their outcomes commit together (docs/transactional.md).

namespace {

/// A failure of `job` to record the usual way instead of its transaction.
job_outcome rolled_back(const job_outcome& job, const std::string& why) {
  job_outcome out = job;
  out.kind = outcome_kind::retryable_failure;
  out.message = why;
  out.delay_ms = 0;
  out.record = outcome_record::pending;
  out.has_event = false;
  out.event = {};
  out.has_resolution = false;
  out.resolution = {};
  return out;
}

/// `job` as recorded by its own transaction (`record`).
job_outcome recorded(job_outcome job, outcome_record record) {
  job.record = record;
  return job;
}

/// `out` (what a handler returned, or its failure) as the outcome of run
/// `job`: the run's identity, which the handler cannot change.
job_outcome as_run(job_outcome out, const job_outcome& job) {
  out.job_id = job.job_id;
  out.lease = job.lease;
  out.attempt = job.attempt;
  out.observed = job.observed;
  out.job_kind = job.job_kind;
  out.queue = job.queue;
  return out;
}

/// Whether `e` says the connection is gone (or a COMMIT's fate unknown):
/// the transaction is lost, not just a statement of it.
bool connection_lost(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const pqxx::broken_connection&) {
    return true;
  } catch (const pqxx::in_doubt_error&) {
    return true;
  } catch (...) {
    return false;
  }
}

/// Whether `e` is a statement that waited too long for a lock
/// (lock_timeout) or was chosen to break a deadlock.
bool lock_wait(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const pqxx::sql_error& ex) {
    return ex.sqlstate() == "55P03" || ex.sqlstate() == "40P01";
  } catch (...) {
    return false;
  }
}

/// What `e` says, for a message.
std::string what_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "a non-standard exception";
  }
}

/// Thrown by run_in_savepoint when libpqxx rolled the whole transaction
/// back: a statement a handler sent with exec() failed (libpqxx 6 aborts
/// the transaction then; exec_params and exec_prepared leave it to the
/// savepoint). `cause`: that statement's error.
struct transaction_closed {
  std::exception_ptr cause;
};

/// How many bytes the client has sent on TCP socket `fd` so far, or
/// nothing when the kernel cannot say (a Unix socket). A handler whose
/// run leaves it unchanged sent nothing, so it changed nothing in the
/// transaction: the savepoint before it still marks the same state.
std::optional<uint64_t> bytes_sent(int fd) {
  tcp_info info{};
  socklen_t len = sizeof info;
  if (fd < 0 || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0
      || len < offsetof(tcp_info, tcpi_bytes_sent) + sizeof info.tcpi_bytes_sent)
    return std::nullopt;
  return info.tcpi_bytes_sent;
}

/// Milliseconds as text, for set_config.
std::string ms_text(std::chrono::milliseconds d) {
  return std::to_string(std::max<int64_t>(d.count(), 1));
}

} // namespace

/// While a group's transaction is open: when it started, its runs, whether
/// a savepoint is open, the connection, and which run's handler runs on it
/// now (a stopped run cancels only its own statement).
struct job_store::group_state {
  std::chrono::steady_clock::time_point started;
  const std::vector<transactional_run*>* runs = nullptr;
  /// A run's savepoint is open (released by the next one's start: one
  /// round trip per run; the COMMIT releases the last).
  bool savepoint = false;
  /// Nothing was sent on the connection since the open savepoint was set
  /// (or rolled back to): the transaction is as it was then, so the next
  /// run needs no savepoint of its own (a round trip saved per handler
  /// that sends no statement).
  bool clean = false;
  std::mutex mtx;
  pqxx::connection_base* conn = nullptr;
  size_t active = SIZE_MAX;

  void set_active(size_t i) {
    std::lock_guard<std::mutex> lock{mtx};
    active = i;
  }

  void cancel(size_t i) {
    std::lock_guard<std::mutex> lock{mtx};
    if (conn == nullptr || active != i)
      return;
    try {
      conn->cancel_query();
    } catch (...) {
      // nothing to cancel, or the connection is gone: either way done
    }
  }

  void disarm() {
    std::lock_guard<std::mutex> lock{mtx};
    conn = nullptr;
  }
};

void job_store::transact(const std::vector<transactional_run*>& runs,
                         std::chrono::milliseconds lock_timeout) {
  auto started = std::chrono::steady_clock::now();
  connect();
  if (backend_started_.empty()) {
    pqxx::nontransaction q(*conn_, "aw_backend_start");
    auto r = run(q, "aw_backend_start");
    if (!r.empty())
      backend_started_ = r[0]["started"].as<std::string>();
  }
  // A run stopped (deadline, lost lease, cancel request, shutdown) while a
  // statement of its handler runs has that statement cancelled, so it
  // rolls back now, not at its limit. The guard ends that once the
  // transaction is over: the connection goes on to other runs.
  auto guard = std::make_shared<group_state>();
  guard->started = started;
  guard->runs = &runs;
  guard->conn = conn_.get();
  struct disarm {
    std::shared_ptr<group_state> g;
    ~disarm() {
      g->disarm();
    }
  } disarmed{guard};
  for (size_t i = 0; i < runs.size(); ++i)
    runs[i]->cancel.on_cancel([guard, i](const std::string&) { guard->cancel(i); });
  auto limit = runs.front()->limit;
  for (auto* r : runs) {
    limit = std::min(limit, r->limit);
    // A lane completion returns its row (for the hooks and follow-ups)
    // when its kind is observed, as on the batched path.
    r->job.observed = r->job.observed || observed_.count(r->job.job_kind) > 0;
  }
  // (Held in an optional: a connection that broke is dropped only once
  // the transaction object that refers to it is gone.)
  std::optional<pqxx::work> open;
  open.emplace(*conn_, "aw_transactional");
  auto& tx = *open;
  auto held = begin_group(tx, runs, ms_text(limit),
                          runs.size() > 1 && lock_timeout.count() > 0
                            ? ms_text(lock_timeout)
                            : std::string{"0"});
  std::vector<transactional_run*> live;
  for (auto* r : runs) {
    if (held.count(r->job.job_id) > 0)
      live.push_back(r);
    else
      r->result = recorded(r->job, outcome_record::stale);
  }
  // The handlers, each in its savepoint. `ran`: those whose outcome this
  // transaction is to commit.
  std::vector<transactional_run*> ran;
  size_t next = 0;
  try {
    for (; next < live.size(); ++next)
      if (run_in_savepoint(tx, *live[next], *guard))
        ran.push_back(live[next]);
  } catch (const transaction_closed& closed) {
    // The run whose statement failed is charged for it, recorded the usual
    // way; the others lost their writes through no fault of theirs and run
    // again, charged nothing.
    auto* failed = live[next];
    failed->result = as_run(outcome_of_exception(failed->job.job_id,
                                                 failed->job.job_kind,
                                                 closed.cause),
                            failed->job);
    for (auto* r : ran)
      r->again = true;
    for (size_t i = next + 1; i < live.size(); ++i)
      live[i]->again = true;
    return;
  } catch (...) {
    // The transaction is lost (the connection broke, the server ended it,
    // a savepoint could not be rolled back to).
    auto e = std::current_exception();
    open.reset();
    if (connection_lost(e))
      disconnect();
    bool any_started = std::any_of(live.begin(), live.end(), [](auto* r) {
      return r->handler_ran;
    });
    if (!any_started)
      throw;
    auto why = "its transaction failed after its handler ran (" + what_of(e)
               + "); its writes were rolled back";
    for (size_t i = next; i < live.size(); ++i)
      if (!live[i]->handler_ran)
        live[i]->again = true; // charged nothing: it runs in another
    for (auto* r : live)
      if (r->handler_ran && !r->again)
        r->result = rolled_back(r->job, why);
    return;
  }
  if (ran.empty())
    return; // nothing to commit: the leases roll back with the rest
  commit_group(open, ran, *guard);
}

bool job_store::run_in_savepoint(pqxx::work& tx, transactional_run& r,
                                 group_state& group) {
  auto started = group.started;
  const auto& runs = *group.runs;
  // A run alone needs no savepoint (a round trip saved): the transaction
  // holds nothing else, so a failure rolls all of it back and is recorded
  // the usual way, as when libpqxx ends a group's transaction.
  bool single = runs.size() == 1;
  if (r.may_start && !r.may_start())
    return false; // withdrawn by its owner: nothing of it runs
  if (r.cancel.cancelled()) {
    r.result = rolled_back(r.job, "the run was stopped before its handler "
                                  "started (" + r.cancel.reason() + ")");
    return false;
  }
  auto elapsed = std::chrono::steady_clock::now() - started;
  if (elapsed >= r.limit) {
    // The group took its time: the run goes to another transaction.
    r.again = true;
    return false;
  }
  std::optional<uint64_t> sent_before;
  if (!single) {
    if (!group.clean) {
      tx.exec0(group.savepoint ? "RELEASE SAVEPOINT aw_run; SAVEPOINT aw_run"
                               : "SAVEPOINT aw_run");
      group.savepoint = true;
    }
    // Read after the savepoint's round trip: any byte the handler sends
    // (a statement, a large-object call, anything) moves it.
    sent_before = bytes_sent(tx.conn().sock());
  }
  size_t index = static_cast<size_t>(
    std::find(runs.begin(), runs.end(), &r) - runs.begin());
  group.set_active(index);
  r.handler_ran = true;
  job_outcome out;
  std::exception_ptr failure;
  try {
    out = (*r.body)(tx);
  } catch (...) {
    failure = std::current_exception();
  }
  group.set_active(SIZE_MAX);
  if (failure && connection_lost(failure))
    std::rethrow_exception(failure);
  if (failure && single)
    throw transaction_closed{failure};
  bool keep = !failure && !r.cancel.cancelled()
              && std::chrono::steady_clock::now() - started <= r.limit;
  // Whether the handler sent nothing: then it changed nothing, there is
  // nothing of it to roll back, and the savepoint serves the next run.
  group.clean = sent_before && bytes_sent(tx.conn().sock()) == sent_before;
  try {
    // A run kept stays in its savepoint until the next one starts. (A
    // single run not kept commits nothing: its transaction is dropped.)
    if (!keep && !single && !group.clean) {
      tx.exec0("ROLLBACK TO SAVEPOINT aw_run");
      group.clean = true; // back to the savepoint, which stays
    }
  } catch (const pqxx::usage_error&) {
    if (!failure)
      throw;
    throw transaction_closed{failure};
  }
  if (failure && runs.size() > 1 && lock_wait(failure)) {
    // It waited on another transaction's lock: alone, it may wait.
    r.again = true;
    r.alone = true;
    return false;
  }
  if (failure) {
    // Its writes are gone; its failure commits with the others' outcomes.
    r.result = as_run(outcome_of_exception(r.job.job_id, r.job.job_kind, failure),
                      r.job);
    return true;
  }
  out = as_run(std::move(out), r.job);
  if (r.cancel.cancelled()) {
    // Whatever stopped the run also stops its writes: the executor
    // records the failure this becomes as the cancellation demands (a
    // deadline rescue, a cancel, or nothing once the job is lost).
    r.result = rolled_back(out, "the run was stopped before its transaction "
                                "committed (" + r.cancel.reason()
                                  + "); its writes were rolled back");
    return false;
  }
  if (!keep) {
    r.result = rolled_back(out, "its transaction ran past its limit of "
                                  + std::to_string(r.limit.count())
                                  + " ms; its writes were rolled back");
    return false;
  }
  r.result = std::move(out);
  return true;
}

std::set<int64_t>
job_store::begin_group(pqxx::work& tx, const std::vector<transactional_run*>& runs,
                       const std::string& limit, const std::string& lock_timeout) {
  const auto& me = opts_.worker_id;
  std::vector<int64_t> ids, leases, lane_ids, lane_leases;
  for (auto* r : runs) {
    bool lane = on_lane(r->job.lease);
    (lane ? lane_ids : ids).push_back(r->job.job_id);
    (lane ? lane_leases : leases).push_back(r->job.lease);
  }
  // One round trip sets the limits and holds the lane jobs, which stay on
  // their lane, locked (a completion is a receipt at the commit, as on the
  // batched path); row-claimed jobs are locked as the running rows they
  // are, in a statement of their own.
  std::set<int64_t> held;
  for (const auto& row : run(tx, "aw_transactional_begin", limit, lock_timeout,
                             me, to_array_literal(lane_leases),
                             to_array_literal(lane_ids)))
    held.insert(row[0].as<int64_t>());
  if (!ids.empty())
    for (const auto& row : run(tx, "aw_transactional_lease", me,
                               to_array_literal(ids), to_array_literal(leases)))
      held.insert(row[0].as<int64_t>());
  return held;
}

void job_store::commit_group(std::optional<pqxx::work>& open,
                             const std::vector<transactional_run*>& ran,
                             group_state& guard) {
  auto& tx = *open;
  std::vector<job_outcome> outcomes;
  outcomes.reserve(ran.size());
  for (auto* r : ran)
    outcomes.push_back(r->result);
  std::vector<finish_report> reports;
  try {
    reports = finish_in(tx, outcomes, failure_follow_ups::in_transaction,
                        leases::held);
  } catch (...) {
    auto e = std::current_exception();
    if (connection_lost(e)) {
      open.reset();
      disconnect();
      for (auto* r : ran)
        r->result = rolled_back(r->result, "its transaction failed before "
                                           "it committed (" + what_of(e)
                                             + "); its writes were rolled back");
      return;
    }
    if (ran.size() == 1) {
      // Its outcome or a follow-up of it failed: the failure is recorded
      // the usual way, its writes rolled back.
      ran.front()->result = as_run(outcome_of_exception(ran.front()->job.job_id,
                                                        ran.front()->job.job_kind, e),
                                   ran.front()->job);
      return;
    }
    // One run's outcome or follow-up failed, and with it the group's
    // transaction: each runs again alone, where only that one fails.
    for (auto* r : ran) {
      r->again = true;
      r->alone = true;
    }
    return;
  }
  for (size_t i = 0; i < ran.size(); ++i) {
    if (reports[i].result != finish_result::applied) {
      // Never while the begin's locks hold the leases; should it happen,
      // nothing of the group commits: a run alone is stale (its writes
      // roll back), and the runs of a group each go again alone (where
      // the lease is read afresh).
      if (ran.size() == 1) {
        ran.front()->result = recorded(ran.front()->job, outcome_record::stale);
        return;
      }
      for (auto* r : ran) {
        r->again = true;
        r->alone = true;
      }
      return;
    }
  }
  for (size_t i = 0; i < ran.size(); ++i) {
    auto& out = ran[i]->result;
    out.has_event = reports[i].has_event;
    out.event = std::move(reports[i].event);
    out.has_resolution = reports[i].has_resolution;
    out.resolution = std::move(reports[i].resolution);
  }
  int pid = conn_->backendpid();
  auto backend = backend_started_;
  try {
    tx.commit();
  } catch (const pqxx::in_doubt_error&) {
    open.reset();
    guard.disarm();
    disconnect();
    // One commit for all: the first run's lease tells for every run (the
    // others are read only when its run was stopped before it could tell).
    std::optional<bool> first;
    for (auto* r : ran) {
      auto held = first ? first
                        : still_held_after_lost_commit(r->job, pid, backend, r->cancel);
      first = held;
      if (!held)
        r->result = rolled_back(r->result, "its transaction's COMMIT got no reply, and "
                                           "the run was stopped (" + r->cancel.reason()
                                             + ") before reading could tell whether it "
                                               "committed");
      else if (*held)
        r->result = rolled_back(r->result, "its transaction's COMMIT got no reply, and "
                                           "reading showed it did not commit; its "
                                           "writes were not applied");
      else
        r->result.record = outcome_record::committed;
    }
    return;
  }
  for (auto* r : ran)
    r->result.record = outcome_record::committed;
}

} // namespace aw::storage
