#include "actor_worker/storage/transaction_pool.hpp"

#include <algorithm>
#include <stdexcept>

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
    done,      // result (or error) set
    withdrawn, // its owner stopped waiting before the handler started
  };
  transactional_run run;
  int64_t deadline_ms = 0;
  std::chrono::steady_clock::time_point started;
  state st = state::waiting;
  /// In a transaction of its own (after a lock wait in a group).
  bool alone = false;
  /// The database's error, when the transaction failed before any handler
  /// of it started.
  std::exception_ptr error;
  /// Its owner waits on it (with the pool's mutex): notified when its state
  /// changes, its token is cancelled, or its turn to open may have come.
  std::condition_variable cv;
};

transaction_pool::transaction_pool(job_store_options opts,
                                   std::vector<std::string> observed_kinds,
                                   follow_up_function follow_ups, int size,
                                   std::chrono::milliseconds limit,
                                   std::map<std::string, int> groups)
  : opts_(std::move(opts)), observed_kinds_(std::move(observed_kinds)),
    follow_ups_(std::move(follow_ups)), size_(std::max(size, 1)),
    limit_(limit), groups_(std::move(groups)) {
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
  wake_fronts();
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

bool transaction_pool::may_open(const request_ptr& own) const {
  // While a group of the queue is open, the next one waits until it ends,
  // a full group waits, or the gathering time passed since the last one
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
  return waiting != waiting_.end() && waiting->second.size() >= group_size(queue);
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
  // The runs left behind have a new oldest: it keeps the gathering time.
  wake_front(own->run.job.queue);
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
    if (error) {
      r->error = error;
      r->st = request::state::done;
    } else if (r->run.again) {
      // Charged nothing, its handler's writes (if any) rolled back: it
      // waits at the front for another transaction.
      r->alone = r->run.alone;
      r->run.again = false;
      r->run.alone = false;
      r->run.handler_ran = false;
      r->run.result = {};
      r->st = request::state::waiting;
      waiting_[r->run.job.queue].push_front(r);
    } else {
      r->st = request::state::done;
    }
    r->cv.notify_one();
  }
  freed_.notify_all();
  wake_fronts();
}

void transaction_pool::wake_front(const std::string& queue) {
  auto waiting = waiting_.find(queue);
  if (waiting != waiting_.end() && !waiting->second.empty())
    waiting->second.front()->cv.notify_one();
}

void transaction_pool::wake_fronts() {
  for (auto& [queue, runs] : waiting_)
    if (!runs.empty())
      runs.front()->cv.notify_one();
}

void transaction_pool::wait_turn(std::unique_lock<std::mutex>& guard,
                                 const request_ptr& own) {
  // Nothing depends on this bound: every change that concerns a run wakes
  // it. It only caps what a missed wake-up could cost.
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds{250};
  if (own->st == request::state::waiting) {
    const auto& queue = own->run.job.queue;
    auto waiting = waiting_.find(queue);
    auto last = last_opened_.find(queue);
    if (waiting != waiting_.end() && !waiting->second.empty()
        && waiting->second.front() == own && last != last_opened_.end())
      until = std::min(until, last->second + defaults::transactional_group_gather);
  }
  own->cv.wait_until(guard, until);
}

job_outcome
transaction_pool::transact(const job_outcome& job, int64_t deadline_ms,
                           std::chrono::steady_clock::time_point started,
                           const cancellation_token& cancel,
                           const transactional_body& body) {
  auto req = std::make_shared<request>();
  req->run.job = job;
  req->run.cancel = cancel;
  req->run.body = &body;
  req->deadline_ms = deadline_ms;
  req->started = started;
  // A cancellation wakes the run (it takes the mutex first, so the wake
  // cannot fall between the run's look at its token and its wait).
  cancel.on_cancel([this, w = std::weak_ptr<request>{req}](const std::string&) {
    if (auto r = w.lock()) {
      std::lock_guard<std::mutex> lock{mtx_};
      r->cv.notify_one();
    }
  });
  std::unique_lock<std::mutex> guard{mtx_};
  waiting_[job.queue].push_back(req);
  for (;;) {
    switch (req->st) {
      case request::state::done:
        if (req->error)
          std::rethrow_exception(req->error);
        return std::move(req->run.result);
      case request::state::waiting:
        if (cancel.cancelled()) {
          auto& queue = waiting_[job.queue];
          queue.erase(std::find(queue.begin(), queue.end(), req));
          wake_front(job.queue);
          job_outcome out = job;
          out.kind = outcome_kind::retryable_failure;
          out.message = stopped_waiting(cancel, size_);
          return out;
        }
        if (!idle_.empty() || made_ < size_) {
          if (!may_open(req)) {
            // Gathering: the oldest run looks again when the time is over.
            wait_turn(guard, req);
            continue;
          }
          // A connection is free: this run's transaction, with the runs
          // of its queue waiting behind it.
          auto group = take_group(req);
          auto store = take_idle();
          guard.unlock();
          run_group(std::move(store), group);
          guard.lock();
          continue;
        }
        break;
      case request::state::taken:
        if (cancel.cancelled()) {
          // In a group that has not started its handler: it never will.
          req->st = request::state::withdrawn;
          job_outcome out = job;
          out.kind = outcome_kind::retryable_failure;
          out.message = "the run was stopped (" + cancel.reason()
                        + ") while it waited for the other runs of its "
                          "transaction";
          return out;
        }
        break;
      case request::state::started:
      case request::state::withdrawn:
        break;
    }
    wait_turn(guard, req);
  }
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
