#include "actor_worker/storage/transaction_pool.hpp"

#include <algorithm>
#include <stdexcept>
#include <thread>

#include <pqxx/except>

#include "actor_worker/config/defaults.hpp"
#include "actor_worker/config/lease.hpp"

namespace aw::storage {

/// A run waiting for, or in, a transaction of the pool. Shared: the group
/// that took it along reads it after its owner may have stopped waiting.
struct transaction_pool::request {
  enum class state {
    waiting,   // on waiting_, for a connection or a group
    taken,     // in a group, its handler not started
    started,   // its handler started (may_start said so)
    done,      // its callback called
    withdrawn, // stopped before its handler started (its callback called)
  };
  transactional_run run;
  /// The handler's transactional part (run.body points here).
  transactional_body body;
  int64_t deadline_ms = 0;
  std::chrono::steady_clock::time_point started;
  state st = state::waiting;
  /// In a transaction of its own (after a lock wait in a group).
  bool alone = false;
  /// Where its end goes (called once, then emptied).
  run_done done;
  /// Lends the threads of the groups it opens.
  spawner spawn;
};

transaction_pool::transaction_pool(job_store_options opts,
                                   std::vector<std::string> observed_kinds,
                                   follow_up_function follow_ups, int size,
                                   std::chrono::milliseconds limit,
                                   std::map<std::string, int> groups,
                                   std::map<std::string, int> concurrency)
  : opts_(std::move(opts)), observed_kinds_(std::move(observed_kinds)),
    follow_ups_(std::move(follow_ups)), size_(std::max(size, 1)),
    limit_(limit), groups_(std::move(groups)),
    concurrency_(std::move(concurrency)) {
  // nop
}

transaction_pool::~transaction_pool() = default;

std::chrono::milliseconds
transaction_pool::limit_for(int64_t deadline_ms,
                            std::chrono::milliseconds elapsed) const {
  using std::chrono::milliseconds;
  // The transaction must end before the watchdog gives the run up, a
  // lease_length after the heartbeat round that last saw it; rounds come
  // every heartbeat_interval, so that one may be an interval old by now.
  auto lease = lease_length(opts_.reclaim_window, opts_.heartbeat_interval)
               - opts_.heartbeat_interval;
  auto limit = std::min(limit_, std::max(lease, milliseconds{1000}));
  if (deadline_ms > 0)
    limit = std::min(limit, milliseconds{deadline_ms} - elapsed);
  return std::max(limit, milliseconds{1});
}

std::unique_ptr<job_store> transaction_pool::make_store() const {
  auto store = std::make_unique<job_store>(opts_);
  store->observe(observed_kinds_);
  store->set_follow_ups(follow_ups_);
  return store;
}

std::unique_ptr<job_store> transaction_pool::take_idle() {
  if (!idle_.empty()) {
    auto store = std::move(idle_.back());
    idle_.pop_back();
    return store;
  }
  ++made_;
  return nullptr;
}

std::unique_ptr<job_store>
transaction_pool::lend(const cancellation_token& cancel) {
  std::unique_ptr<job_store> store;
  {
    std::unique_lock<std::mutex> guard{mtx_};
    while (idle_.empty() && made_ >= size_) {
      if (cancel.cancelled())
        return nullptr;
      // The token has no waiting of its own to join: look again often.
      freed_.wait_for(guard, std::chrono::milliseconds{20});
    }
    store = take_idle();
  }
  return store ? std::move(store) : make_store();
}

void transaction_pool::give_back(std::unique_ptr<job_store> store) {
  std::lock_guard<std::mutex> guard{mtx_};
  idle_.push_back(std::move(store));
  freed_.notify_all();
  dispatch();
}

namespace {

/// Why a run got no connection of the pool.
std::string stopped_waiting(const cancellation_token& cancel, int size) {
  return "the run was stopped (" + cancel.reason()
         + ") while it waited for a connection of the transactional pool "
           "(database.transactional_pool_size " + std::to_string(size) + ")";
}

} // namespace

size_t transaction_pool::group_size(const std::string& queue) const {
  auto size = groups_.find(queue);
  size_t max = size == groups_.end() ? 1 : static_cast<size_t>(size->second);
  return std::min(max, static_cast<size_t>(defaults::max_transactional_group));
}

size_t transaction_pool::overlap_size(const std::string& queue) const {
  auto concurrency = concurrency_.find(queue);
  if (concurrency == concurrency_.end())
    return group_size(queue);
  auto share = static_cast<size_t>(concurrency->second
                                   / defaults::transactional_group_overlap_divisor);
  return std::clamp<size_t>(share, 2, std::max<size_t>(group_size(queue), 2));
}

bool transaction_pool::may_open(const request_ptr& own) const {
  // While a group of the queue is open, the next one waits until it ends,
  // enough runs wait (overlap_size), or the gathering time passed since the last one
  // opened: runs that come meanwhile share a commit (group commit) instead
  // of each taking a connection of its own, and the server does one
  // transaction's work for many runs. The time bounds what a run waits
  // behind a slow group (a handler that sleeps, a lock wait).
  const auto& queue = own->run.job.queue;
  auto open = open_groups_.find(queue);
  if (own->alone || open == open_groups_.end() || open->second == 0)
    return true;
  auto last = last_opened_.find(queue);
  if (last != last_opened_.end()
      && std::chrono::steady_clock::now() - last->second
           >= defaults::transactional_group_gather)
    return true;
  auto waiting = waiting_.find(queue);
  return waiting != waiting_.end() && waiting->second.size() >= overlap_size(queue);
}

std::vector<transaction_pool::request_ptr>
transaction_pool::take_group(const request_ptr& own) {
  auto& queue = waiting_[own->run.job.queue];
  queue.erase(std::find(queue.begin(), queue.end(), own));
  std::vector<request_ptr> group{own};
  auto max = group_size(own->run.job.queue);
  if (!own->alone)
    for (auto i = queue.begin(); i != queue.end() && group.size() < max;) {
      if ((*i)->alone) {
        ++i;
        continue;
      }
      group.push_back(*i);
      i = queue.erase(i);
    }
  for (auto& r : group)
    r->st = request::state::taken;
  // A run alone (it waits for a lock) gathers nobody: it holds up no
  // group of its queue.
  if (!own->alone) {
    ++open_groups_[own->run.job.queue];
    last_opened_[own->run.job.queue] = std::chrono::steady_clock::now();
  }
  return group;
}

void transaction_pool::run_group(std::unique_ptr<job_store> store,
                                 const std::vector<request_ptr>& group) {
  std::vector<transactional_run*> runs;
  bool counted = !group.front()->alone; // (take_group counted it open)
  auto now = std::chrono::steady_clock::now();
  for (auto& r : group) {
    r->run.limit = limit_for(r->deadline_ms,
                             std::chrono::duration_cast<std::chrono::milliseconds>(
                               now - r->started));
    // The group asks before it starts a handler: a run whose owner
    // stopped waiting meanwhile is left alone.
    r->run.may_start = [this, w = std::weak_ptr<request>{r}] {
      auto r = w.lock();
      std::lock_guard<std::mutex> guard{mtx_};
      if (!r || r->st == request::state::withdrawn)
        return false;
      r->st = request::state::started;
      return true;
    };
    runs.push_back(&r->run);
  }
  std::exception_ptr error;
  try {
    if (!store)
      store = make_store();
    store->transact(runs, defaults::transactional_group_lock_timeout);
  } catch (...) {
    error = std::current_exception();
    try {
      throw;
    } catch (const pqxx::broken_connection&) {
      store->disconnect();
    } catch (const pqxx::in_doubt_error&) {
      store->disconnect();
    } catch (...) {
      // the connection stands
    }
  }
  // The runs' ends go out once the lock is released: a callback may take
  // other locks (an executor's mailbox, a waiting caller's).
  std::vector<std::pair<run_done, job_outcome>> ends;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (store)
      idle_.push_back(std::move(store));
    else
      --made_; // it could not be made
    if (counted)
      --open_groups_[group.front()->run.job.queue];
    for (auto& r : group) {
      r->run.may_start = nullptr;
      if (r->st == request::state::withdrawn)
        continue;
      if (!error && r->run.again) {
        // Charged nothing, its handler's writes (if any) rolled back: it
        // waits at the front for another transaction.
        r->alone = r->run.alone;
        r->run.again = false;
        r->run.alone = false;
        r->run.handler_ran = false;
        r->run.result = {};
        r->st = request::state::waiting;
        waiting_[r->run.job.queue].push_front(r);
        continue;
      }
      r->st = request::state::done;
      ends.emplace_back(std::move(r->done), std::move(r->run.result));
    }
    freed_.notify_all();
    dispatch();
  }
  for (auto& [done, out] : ends)
    done(std::move(out), error);
}

void transaction_pool::dispatch() {
  for (auto& [queue, runs] : waiting_) {
    bool held_back = false;
    for (auto i = runs.begin();
         i != runs.end() && (!idle_.empty() || made_ < size_);) {
      auto own = *i;
      if (!may_open(own)) {
        // Gathering: only runs alone may open now (they gather nobody).
        held_back = true;
        ++i;
        continue;
      }
      auto group = take_group(own);
      // (A std::function is copied: the connection rides in a holder.)
      auto store = std::make_shared<std::unique_ptr<job_store>>(take_idle());
      own->spawn([this, store, group] { run_group(std::move(*store), group); });
      i = runs.begin(); // take_group changed the queue
    }
    if (held_back)
      for (auto& r : runs)
        if (!r->alone) {
          arm_gather(queue, r);
          break;
        }
  }
}
void transaction_pool::arm_gather(const std::string& queue,
                                  const request_ptr& own) {
  auto last = last_opened_.find(queue);
  if (last == last_opened_.end() || !gathering_.insert(queue).second)
    return;
  auto until = last->second + defaults::transactional_group_gather;
  own->spawn([this, queue, until] {
    std::this_thread::sleep_until(until);
    std::lock_guard<std::mutex> guard{mtx_};
    gathering_.erase(queue);
    dispatch();
  });
}

void transaction_pool::withdraw(const request_ptr& r) {
  job_outcome out;
  run_done done;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    const auto& cancel = r->run.cancel;
    if (r->st == request::state::waiting) {
      auto& queue = waiting_[r->run.job.queue];
      queue.erase(std::find(queue.begin(), queue.end(), r));
      out = r->run.job;
      out.kind = outcome_kind::retryable_failure;
      out.message = stopped_waiting(cancel, size_);
    } else if (r->st == request::state::taken) {
      // In a group that has not started its handler: it never will.
      out = r->run.job;
      out.kind = outcome_kind::retryable_failure;
      out.message = "the run was stopped (" + cancel.reason()
                    + ") while it waited for the other runs of its "
                      "transaction";
    } else {
      return; // started (its group records the stop) or ended
    }
    r->st = request::state::withdrawn;
    done = std::move(r->done);
  }
  done(std::move(out), nullptr);
}

void transaction_pool::submit(const job_outcome& job, int64_t deadline_ms,
                              std::chrono::steady_clock::time_point started,
                              const cancellation_token& cancel,
                              transactional_body body, run_done done,
                              spawner spawn) {
  auto req = std::make_shared<request>();
  req->run.job = job;
  req->run.cancel = cancel;
  req->body = std::move(body);
  req->run.body = &req->body;
  req->deadline_ms = deadline_ms;
  req->started = started;
  req->done = std::move(done);
  req->spawn = std::move(spawn);
  {
    std::lock_guard<std::mutex> guard{mtx_};
    waiting_[job.queue].push_back(req);
    dispatch();
  }
  // (At once if it is cancelled already.)
  cancel.on_cancel([this, w = std::weak_ptr<request>{req}](const std::string&) {
    if (auto r = w.lock())
      withdraw(r);
  });
}

job_outcome
transaction_pool::transact(const job_outcome& job, int64_t deadline_ms,
                           std::chrono::steady_clock::time_point started,
                           const cancellation_token& cancel,
                           const transactional_body& body) {
  // The calling thread lends itself: it runs the groups its run opens
  // (and their gathering waits) until its run ends.
  struct waiter {
    std::mutex mtx;
    std::condition_variable cv;
    std::deque<std::function<void()>> tasks;
    bool ended = false;
    job_outcome out;
    std::exception_ptr error;
  };
  auto w = std::make_shared<waiter>();
  submit(
    job, deadline_ms, started, cancel, body,
    [w](job_outcome out, std::exception_ptr error) {
      std::lock_guard<std::mutex> guard{w->mtx};
      w->out = std::move(out);
      w->error = error;
      w->ended = true;
      w->cv.notify_one();
    },
    [w](std::function<void()> task) {
      std::lock_guard<std::mutex> guard{w->mtx};
      w->tasks.push_back(std::move(task));
      w->cv.notify_one();
    });
  std::unique_lock<std::mutex> guard{w->mtx};
  for (;;) {
    // A task is lent this thread under the pool's lock while the run still
    // waits, so it is queued here before the run can end: none is left.
    if (!w->tasks.empty()) {
      auto task = std::move(w->tasks.front());
      w->tasks.pop_front();
      guard.unlock();
      task();
      guard.lock();
      continue;
    }
    if (w->ended)
      break;
    w->cv.wait(guard);
  }
  if (w->error)
    std::rethrow_exception(w->error);
  return std::move(w->out);
}

std::optional<std::string>
transaction_pool::register_callback(int64_t job_id, int64_t lease,
                                    std::chrono::milliseconds timeout,
                                    const cancellation_token& cancel) {
  auto store = lend(cancel);
  if (!store)
    throw std::runtime_error("registering a callback id: "
                             + stopped_waiting(cancel, size_));
  try {
    auto id = store->register_callback(job_id, lease, timeout);
    give_back(std::move(store));
    return id;
  } catch (const pqxx::broken_connection&) {
    store->disconnect();
    give_back(std::move(store));
    throw;
  } catch (const pqxx::in_doubt_error&) {
    store->disconnect();
    give_back(std::move(store));
    throw;
  } catch (...) {
    give_back(std::move(store));
    throw;
  }
}

} // namespace aw::storage
