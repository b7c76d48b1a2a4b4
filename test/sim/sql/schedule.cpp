#include "schedule.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "actor_worker/messages/error.hpp"
#include "actor_worker/storage/db_error.hpp"
#include "actor_worker/storage/job_store.hpp"

#include "checks.hpp"
#include "model_mirror.hpp"
#include "session.hpp"

namespace aw::sim::sql {

namespace {

using clock_type = std::chrono::steady_clock;

/// The queue every job of a schedule is in.
constexpr const char* queue_name = "q";

/// How long the clock jumps: past the reclaim window and every backoff.
constexpr const char* jump = "1 hour";

// -- the parties ---------------------------------------------------------

/// A job a worker holds, as its claim told it.
struct held_run {
  int64_t lease = 0;
  int32_t attempt = 0;
  std::string kind;
  /// Claimed after the last clock jump: inside its reclaim window.
  bool recent = true;
  /// An outcome of it was sent and its commit is in doubt.
  bool in_doubt = false;
};

/// A worker: a job_store on a session, and what it believes it holds.
struct worker {
  std::unique_ptr<storage::job_store> store;
  std::unique_ptr<session> s;
  std::string id;
  std::map<int64_t, held_run> held;
  /// Runs it no longer holds (released, taken back, finished): an outcome
  /// of one of these is stale and must be refused.
  std::vector<std::pair<int64_t, held_run>> lost;
  /// Outcomes whose commit is in doubt: sent again (in_doubt) first.
  std::vector<job_outcome> resend;
  /// Its row in worker_nodes was refreshed since the last clock jump.
  bool refreshed = false;
  /// Its connection was killed while it was idle: its next step fails
  /// before it sends anything (nothing in doubt).
  bool killed_idle = false;
};

/// An enqueuing application: its transaction stays open across steps.
struct enqueuer {
  std::unique_ptr<session> s;
  std::unique_ptr<pqxx::connection> conn;
  std::unique_ptr<pqxx::work> tx;
  /// Tokens (args.t) inserted in the open transaction.
  std::vector<std::string> pending;
  bool open = false;
  /// Its connection was killed: the next transaction reconnects.
  bool reconnect = false;
};

/// A session that holds a snapshot open (an operator's transaction).
struct holder {
  std::unique_ptr<session> s;
  std::unique_ptr<pqxx::connection> conn;
  std::unique_ptr<pqxx::work> tx;
  bool open = false;
};

bool connection_error(const std::exception& e) {
  return storage::classify(e) != ec::database_error;
}

std::string kind_name(outcome_kind k) {
  switch (k) {
    case outcome_kind::completed: return "completed";
    case outcome_kind::retryable_failure: return "retryable_failure";
    case outcome_kind::terminal_failure: return "terminal_failure";
    case outcome_kind::retry_after: return "retry_after";
    case outcome_kind::snoozed: return "snoozed";
    case outcome_kind::cancelled: return "cancelled";
    default: return "other";
  }
}

/// The follow-ups of a schedule: a completed `fu` job enqueues one `child`
/// naming its parent (checks.hpp counts them).
std::vector<enqueue_request> follow_ups(const job_event& e) {
  if (e.type != event_type::completed)
    return {};
  auto row = nlohmann::json::parse(e.job_json, nullptr, false);
  if (!row.is_object() || row.value("kind", std::string{}) != "fu")
    return {};
  enqueue_request r;
  r.kind = "child";
  r.args = {{"parent", row.value("id", int64_t{0})}};
  r.options.queue = queue_name;
  return {r};
}

// -- the schedule --------------------------------------------------------

} // namespace

/// Empties the queue tables and resets the ring, for the next schedule.
void reset_database(pqxx::connection_base& conn);


class schedule {
public:
  /// The parties live as long as the schedule runner: their sessions keep
  /// their connections and plans from seed to seed (a new session plans
  /// every SQL function again, which cost more than the schedule itself).
  explicit schedule(const std::string& url)
    : control_(url), checks_(control_) {
    opts_.url = url;
    for (int i = 0; i < random_workers; ++i)
      workers_.push_back(make_worker("w" + std::to_string(i), i));
    // The drain's worker: the others' claims are the rescue's to end.
    workers_.push_back(make_worker("d", 0));
    for (int i = 0; i < 2; ++i) {
      enqueuer e;
      e.s = std::make_unique<session>("e" + std::to_string(i));
      enqueuers_.push_back(std::move(e));
    }
    holder_.s = std::make_unique<session>("h");
  }

  ~schedule() {
    // Sessions first (their threads end), then their connections.
    for (auto& w : workers_)
      w.s.reset();
    for (auto& e : enqueuers_)
      e.s.reset();
    holder_.s.reset();
  }

  schedule_result run(const schedule_options& opts) {
    opts_ = opts;
    rng_.seed(opts.seed);
    begin_run();
    // Every worker starts as the runtime's does, with its row in
    // worker_nodes, but in a quarter of the schedules w2 starts without it
    // (as a worker killed before its first heartbeat round): its claims
    // alone show it alive, by the rule of actor_worker_rescue the model
    // follows too (docs/delivery.md#sql-schedules).
    bool rowless = chance(25);
    for (size_t i = 0; i < workers_.size(); ++i)
      if (!rowless || i != 2)
        heartbeat_step(workers_[i]);
    for (step_ = 0; step_ < opts_.steps && result_.violations.empty();
         ++step_) {
      reap(0);
      next_step();
    }
    if (result_.violations.empty())
      drain();
    result_.jobs = tokens_.committed_count();
    return std::move(result_);
  }

private:
  /// Workers the schedule's steps pick from (the drain's comes after).
  static constexpr int random_workers = 3;

  /// Ends what the last schedule left open (it stopped at a violation),
  /// empties the database and forgets the last schedule.
  void begin_run() {
    step_ = 0;
    settle_quietly();
    for (auto& e : enqueuers_)
      if (e.open)
        end_step(e, false);
    if (holder_.open)
      holder_step();
    settle_quietly();
    reset_database(control_);
    result_ = schedule_result{};
    tokens_ = token_book{};
    next_token_ = 0;
    began_ = clock_type::now();
    for (auto& w : workers_) {
      w.held.clear();
      w.lost.clear();
      w.resend.clear();
      w.refreshed = false;
      w.killed_idle = false;
    }
    mirror_ = std::make_unique<model_mirror>(1, 60'000);
    token_info_.clear();
  }

  /// settle(), whatever it finds: for the start of a schedule.
  void settle_quietly() {
    settle();
    result_ = schedule_result{};
  }

private:
  worker make_worker(const std::string& name, int i) {
    worker w;
    storage::job_store_options o;
    o.url = opts_.url;
    o.worker_id = "sim-" + name;
    o.node = name;
    o.host = "sim";
    o.version = "sim";
    o.queues = {queue_name};
    // One limit for all: the model has one (model_mirror.hpp).
    o.max_retries = 1;
    o.reclaim_window = std::chrono::seconds{60};
    // Different retentions: each ring round sets its own period, which
    // moves the current slot (docs/storage.md, concept 7).
    o.completed_retention = std::chrono::minutes{4 * (i + 1)};
    w.store = std::make_unique<storage::job_store>(o);
    w.store->observe({"fu"});
    w.store->set_follow_ups(follow_ups);
    w.s = std::make_unique<session>(name);
    w.id = o.worker_id;
    return w;
  }

  int pick(int n) {
    return std::uniform_int_distribution<int>(0, n - 1)(rng_);
  }

  bool chance(int percent) {
    return pick(100) < percent;
  }

  void trace(const std::string& line) {
    auto text = "#" + std::to_string(step_) + " " + line;
    if (opts_.verbose)
      std::printf("%6.0f ms %s\n",
                  std::chrono::duration<double, std::milli>(
                    clock_type::now() - began_).count(),
                  text.c_str());
    result_.trace.push_back(std::move(text));
  }

  void violated(const std::string& invariant, const std::string& detail) {
    trace("VIOLATION " + invariant + ": " + detail);
    result_.violations.push_back({invariant, detail, step_});
  }

  // -- running steps -------------------------------------------------------

  /// Sessions with a step under way (waiting on a lock).
  std::set<session*> in_flight_;
  /// Continuations of steps in flight that finished after the step
  /// release() waits for: run right after its own.
  std::vector<std::pair<session*, continuation>> later_;

  /// Runs the continuations of finished steps, waiting up to `us` for
  /// each, then checks the invariants once if any finished. A step in
  /// flight that no longer waits on a lock (what held it let go) is
  /// waited for: its commit came before the next step, and so must its
  /// bookkeeping (the model follows in that order). Steps that finished
  /// together run their continuations in the order they finished, not in
  /// an order of the sessions: one that waited for another's lock
  /// committed after it, and the model must follow them so.
  void reap(int us) {
    std::vector<std::pair<session*, continuation>> done;
    for (auto it = in_flight_.begin(); it != in_flight_.end();) {
      auto c = (*it)->wait(us);
      if (!c && !waits_on_lock((*it)->pid()))
        c = (*it)->wait(5'000'000);
      if (c) {
        done.emplace_back(*it, std::move(*c));
        it = in_flight_.erase(it);
      } else {
        ++it;
      }
    }
    if (done.empty())
      return;
    run_in_order(done);
    check();
  }

  /// Runs the continuations `done` in the order their steps finished.
  static void run_in_order(std::vector<std::pair<session*, continuation>>& done) {
    std::stable_sort(done.begin(), done.end(), [](auto& a, auto& b) {
      return a.first->finished_at() < b.first->finished_at();
    });
    for (auto& [s, c] : done)
      c();
    done.clear();
  }

  /// Takes the steps in flight that finished out of flight: those that
  /// finished before `s`'s step did (their commits came first) are
  /// returned, to run before its continuation; the others go to later_,
  /// to run after it.
  std::vector<std::pair<session*, continuation>> finished_before(session& s) {
    std::vector<std::pair<session*, continuation>> out;
    auto at = s.finished_at();
    for (auto it = in_flight_.begin(); it != in_flight_.end();) {
      auto c = (*it)->wait(0);
      if (!c) {
        ++it;
        continue;
      }
      if ((*it)->finished_at() < at)
        out.emplace_back(*it, std::move(*c));
      else
        later_.emplace_back(*it, std::move(*c));
      it = in_flight_.erase(it);
    }
    return out;
  }

  /// Whether server process `pid` waits for a lock.
  bool waits_on_lock(int pid) {
    if (pid == 0)
      return false;
    pqxx::nontransaction q(control_);
    auto r = q.exec_params("SELECT wait_event_type = 'Lock' FROM pg_stat_activity"
                           " WHERE pid = $1", pid);
    return !r.empty() && !r[0][0].is_null() && r[0][0].as<bool>();
  }

  /// The server processes that `pid` waits for, when it waits on a lock.
  std::vector<int> lock_holders(int pid) {
    std::vector<int> out;
    if (pid == 0)
      return out;
    pqxx::nontransaction q(control_);
    for (const auto& row : q.exec_params(
           "SELECT b FROM pg_stat_activity AS a,"
           " unnest(pg_blocking_pids(a.pid)) AS b"
           " WHERE a.pid = $1 AND a.wait_event_type = 'Lock'", pid))
      out.push_back(row[0].as<int>());
    return out;
  }

  /// What the server processes `pids` are and do, for the trace.
  std::string describe(const std::vector<int>& pids) {
    std::string out;
    pqxx::nontransaction q(control_);
    for (auto pid : pids) {
      auto r = q.exec_params(
        "SELECT coalesce(application_name, ''), coalesce(state, ''),"
        "       coalesce(wait_event_type || ':' || wait_event, ''),"
        "       left(coalesce(query, ''), 80)"
        "  FROM pg_stat_activity WHERE pid = $1", pid);
      out += (out.empty() ? "" : "; ") + std::string{"pid "} + std::to_string(pid);
      for (auto& w : workers_)
        if (w.s->pid() == pid)
          out += " (" + w.s->name() + "'s last)";
      for (auto& e : enqueuers_)
        if (e.s->pid() == pid)
          out += " (" + e.s->name() + "'s last)";
      if (holder_.s->pid() == pid)
        out += " (h's last)";
      if (control_.backendpid() == pid)
        out += " (the checks')";
      if (r.empty()) {
        out += " gone";
        continue;
      }
      out += " " + r[0][0].as<std::string>() + " " + r[0][1].as<std::string>()
             + " " + r[0][2].as<std::string>() + " '" + r[0][3].as<std::string>()
             + "'";
    }
    return out;
  }

  /// The names of the parties among `pids` whose transactions the
  /// schedule keeps open: the holder's or an enqueuer's open transaction,
  /// a step in flight. Empty when none is.
  std::string scheduled_holders(const std::vector<int>& pids) {
    std::string names;
    auto add = [&](session& s) {
      if (s.pid() != 0
          && std::find(pids.begin(), pids.end(), s.pid()) != pids.end())
        names += (names.empty() ? "" : ", ") + s.name();
    };
    if (holder_.open)
      add(*holder_.s);
    for (auto& e : enqueuers_)
      if (e.open)
        add(*e.s);
    for (auto* s : in_flight_)
      add(*s);
    return names;
  }

  /// Releases `st` on `s` and waits until it finished (its continuation
  /// runs, the invariants are checked) or waits on a lock (it stays in
  /// flight and the schedule goes on with other sessions).
  /// `quiet`: the step changes nothing another transaction sees (it
  /// begins or writes into a transaction still open), so the checks wait
  /// for the next step.
  ///
  /// The model follows the steps in the order their continuations run,
  /// which must be the order they committed in. A step in flight does not
  /// always wait for a later step to end what holds it: a ring round gives
  /// up at its lock timeout (100 ms), a claim stops waiting for a lane's
  /// claim lock after 2 s, and what waited behind them goes on by itself,
  /// beside the steps released meanwhile. So when a step finishes, the
  /// continuations of steps in flight that finished before it run first
  /// (the CI run of 2026-12-07, seed 151: after a clock jump, a rescue
  /// waited behind a ring round's lock, went on when the round gave up,
  /// and took back a claim while the next step sent an outcome of it; the
  /// SQL refused the outcome as stale, and the model, not yet told of the
  /// rescue, applied it).
  ///
  /// A step goes in flight only when it waits for a transaction the
  /// schedule keeps open (the holder's, an enqueuer's, a step's in
  /// flight). A lock of any other transaction goes by itself within a
  /// moment, and the step is waited for: a server process that already
  /// sent its client the error of its lock timeout or of its kill, and
  /// has not yet released its locks (PostgreSQL reports the error, then
  /// aborts), a moment that a loaded machine stretches.
  void release(session& s, step st, bool quiet = false) {
    s.set_pid(0);
    s.start(std::move(st));
    auto began = clock_type::now();
    bool noted = false;
    for (int round = 0;; ++round) {
      auto c = s.wait(round < 5 ? 200 : 2000);
      if (c) {
        auto before = finished_before(s);
        bool others = !before.empty() || !later_.empty();
        run_in_order(before);
        (*c)();
        run_in_order(later_);
        if (!quiet || others)
          check();
        return;
      }
      if (round >= 2) {
        auto by = lock_holders(s.pid());
        if (!by.empty()) {
          auto names = scheduled_holders(by);
          if (!names.empty()) {
            trace(s.name() + " waits on a lock (held by " + names + ")");
            ++result_.blocked_steps;
            in_flight_.insert(&s);
            return;
          }
          if (!noted) {
            trace(s.name() + " waits for a lock of a transaction ending by"
                             " itself (" + describe(by) + ")");
            ++result_.transient_waits;
            noted = true;
          }
        }
      }
      if (clock_type::now() - began > std::chrono::seconds{30}) {
        violated("harness", s.name() + ": a step ran for 30 s without "
                                        "waiting on a lock");
        in_flight_.insert(&s);
        return;
      }
    }
  }

  /// Waits for every step in flight (the drain ends every transaction
  /// first, so none waits for long).
  void settle() {
    auto began = clock_type::now();
    while (!in_flight_.empty()) {
      reap(5000);
      if (clock_type::now() - began > std::chrono::seconds{30}) {
        std::string names;
        for (auto* s : in_flight_)
          names += " " + s->name();
        violated("harness", "steps still waiting after 30 s:" + names);
        return;
      }
    }
  }

  void check() {
    auto t0 = clock_type::now();
    for (auto& v : checks_.after_step(tokens_))
      violated(v.first, v.second);
    result_.check_ms += std::chrono::duration<double, std::milli>(
                          clock_type::now() - t0).count();
  }

  // -- choosing the next step ---------------------------------------------

  void next_step() {
    int r = pick(100);
    if (r < 55) {
      auto& w = workers_[pick(random_workers)];
      if (!w.s->busy())
        worker_step(w);
    } else if (r < 85) {
      auto& e = enqueuers_[pick(static_cast<int>(enqueuers_.size()))];
      if (!e.s->busy())
        enqueuer_step(e);
    } else if (r < 90) {
      if (!holder_.s->busy())
        holder_step();
    } else if (r < 95) {
      kill_step();
    } else if (in_flight_.empty()) {
      jump_step();
    }
  }

  void worker_step(worker& w) {
    if (!w.resend.empty())
      return finish_step(w, w.resend, true);
    int r = pick(100);
    std::vector<int64_t> live;
    for (auto& [id, h] : w.held)
      if (!h.in_doubt)
        live.push_back(id);
    if (r < 25 || (live.empty() && r < 50))
      return claim_step(w);
    if (r < 50 && !live.empty()) {
      std::vector<job_outcome> outs;
      int n = 1 + pick(std::min<int>(3, static_cast<int>(live.size())));
      std::shuffle(live.begin(), live.end(), rng_);
      for (int i = 0; i < n; ++i)
        outs.push_back(outcome_of(live[i], w.held[live[i]], random_kind()));
      return finish_step(w, outs, false);
    }
    if (r < 65)
      return heartbeat_step(w);
    if (r < 70 && !live.empty())
      return release_step(w, live);
    if (r < 75 && !live.empty())
      return record_starts_step(w, live);
    if (r < 87)
      return rescue_step(w);
    if (r < 92)
      return ring_step(w);
    if (!w.lost.empty())
      return stale_outcome_step(w);
    return claim_step(w);
  }

  outcome_kind random_kind() {
    int r = pick(100);
    if (r < 55)
      return outcome_kind::completed;
    if (r < 65)
      return outcome_kind::retry_after;
    if (r < 73)
      return outcome_kind::retryable_failure;
    if (r < 81)
      return outcome_kind::snoozed;
    if (r < 90)
      return outcome_kind::cancelled;
    return outcome_kind::terminal_failure;
  }

  job_outcome outcome_of(int64_t id, const held_run& h, outcome_kind k) {
    job_outcome o;
    o.job_id = id;
    o.lease = h.lease;
    o.attempt = h.attempt;
    o.kind = k;
    o.message = "sim " + kind_name(k);
    o.delay_ms = 0;
    o.observed = h.kind == "fu";
    o.job_kind = h.kind;
    o.queue = queue_name;
    return o;
  }

  /// Runs `work(store)` on `w`'s session; then, on the scheduler's
  /// thread, `done(value)`, or `fail(broken, what)` when it threw (a
  /// broken connection is dropped first, as pg_backend does).
  template <class Work, class Done, class Fail>
  void store_step(worker& w, Work work, Done done, Fail fail) {
    release(*w.s, [&w, work, done, fail]() -> continuation {
      try {
        auto& conn = w.store->connection();
        w.s->set_pid(conn.backendpid());
        auto value = work(*w.store);
        return [&w, done, value] {
          w.killed_idle = false;
          done(value);
        };
      } catch (const std::exception& e) {
        bool broken = connection_error(e);
        if (broken)
          w.store->disconnect();
        std::string what = e.what();
        return [fail, broken, what] { fail(broken, what); };
      }
    });
  }

  /// A step of `w` failed: when its connection broke under it (not
  /// before it: killed while idle), what it did is in doubt, and the model
  /// can no longer follow.
  void after_failure(worker& w, bool broken, const std::string& what_step) {
    if (broken && !w.killed_idle)
      mirror_->diverge(w.s->name() + "'s " + what_step + " is in doubt");
    w.killed_idle = false;
  }

  /// Reports a disagreement with the model.
  void agree(const std::optional<std::string>& disagreement) {
    if (disagreement)
      violated("model_agreement", *disagreement);
  }

  /// A fail handler that only traces.
  auto traced(worker& w, const std::string& what_step) {
    return [this, &w, what_step](bool broken, const std::string& what) {
      trace(w.s->name() + " " + what_step + " failed: " + first_line(what));
      after_failure(w, broken, what_step);
    };
  }

  void claim_step(worker& w) {
    int limit = 1 + pick(4);
    trace(w.s->name() + " claims up to " + std::to_string(limit));
    store_step(
      w, [limit](storage::job_store& st) { return st.claim(queue_name, limit); },
      [this, &w](const claim_result& got) { on_claimed(w, got); },
      traced(w, "claim"));
  }

  /// A time of the steady clock in ms, as the model's clock reads it.
  static int64_t ms_of(clock_type::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
             t.time_since_epoch()).count();
  }

  static std::string first_line(const std::string& s) {
    return s.substr(0, s.find('\n'));
  }

  void on_claimed(worker& w, const claim_result& got) {
    std::string ids;
    for (auto& j : got.jobs) {
      ids += " " + std::to_string(j.id) + "@" + std::to_string(j.lease);
      for (auto& other : workers_) {
        auto it = other.held.find(j.id);
        if (it == other.held.end() || it->second.in_doubt)
          continue;
        if (checks_.lease_taken_back(it->second.lease)) {
          other.lost.emplace_back(it->first, it->second);
          other.held.erase(it);
          continue;
        }
        violated("one_live_lease",
                 "job " + std::to_string(j.id) + " claimed by " + w.id
                   + " with lease " + std::to_string(j.lease)
                   + " while " + other.id + " holds it with live lease "
                   + std::to_string(it->second.lease));
      }
      held_run h;
      h.lease = j.lease;
      h.attempt = j.attempt;
      h.kind = j.kind;
      h.recent = true;
      w.held[j.id] = h;
    }
    trace(w.s->name() + " claimed" + (ids.empty() ? " nothing" : ids));
    agree(mirror_->claimed(w.id, got.jobs, ms_of(w.s->finished_at())));
  }

  void finish_step(worker& w, std::vector<job_outcome> outs, bool in_doubt) {
    std::string what;
    for (auto& o : outs)
      what += " " + std::to_string(o.job_id) + "@" + std::to_string(o.lease)
              + ":" + kind_name(o.kind);
    trace(w.s->name() + (in_doubt ? " sends again (in doubt)" : " finishes")
          + what);
    if (in_doubt)
      w.resend.clear();
    for (auto& o : outs)
      if (auto it = w.held.find(o.job_id);
          it != w.held.end() && it->second.lease == o.lease)
        it->second.in_doubt = true;
    store_step(
      w,
      [outs, in_doubt](storage::job_store& st) {
        return st.finish(outs, in_doubt);
      },
      [this, &w, outs, in_doubt](const std::vector<storage::finish_report>& r) {
        on_finished(w, outs, r, in_doubt);
      },
      [this, &w, outs](bool broken, const std::string& what) {
        trace(w.s->name() + " finish failed: " + first_line(what));
        after_failure(w, broken, "finish");
        if (broken) {
          // Its commit is in doubt: sent again, in_doubt, first.
          w.resend = outs;
        } else {
          for (auto& o : outs)
            if (auto it = w.held.find(o.job_id); it != w.held.end())
              it->second.in_doubt = false;
        }
      });
  }

  void on_finished(worker& w, const std::vector<job_outcome>& outs,
                   const std::vector<storage::finish_report>& reports,
                   bool in_doubt) {
    std::string what;
    for (size_t i = 0; i < outs.size(); ++i) {
      auto& o = outs[i];
      bool applied = reports[i].result == finish_result::applied;
      what += " " + std::to_string(o.job_id) + (applied ? ":applied" : ":stale");
      auto it = w.held.find(o.job_id);
      bool ours = it != w.held.end() && it->second.lease == o.lease;
      if (!applied && ours && !in_doubt
          && !checks_.lease_taken_back(o.lease))
        violated("live_outcome_applied",
                 "outcome " + kind_name(o.kind) + " of job "
                   + std::to_string(o.job_id) + " with live lease "
                   + std::to_string(o.lease) + " was refused");
      if (ours) {
        w.lost.emplace_back(it->first, it->second);
        w.held.erase(it);
      }
    }
    trace(w.s->name() + " finished" + what);
    agree(mirror_->finished(w.id, outs, reports, ms_of(w.s->started_at())));
  }

  void stale_outcome_step(worker& w) {
    auto& [id, h] = w.lost[pick(static_cast<int>(w.lost.size()))];
    // Another claim of the same job by this worker: that run's lease is
    // the live one, not this.
    auto kind = chance(70) ? outcome_kind::completed : outcome_kind::retry_after;
    std::vector<job_outcome> outs{outcome_of(id, h, kind)};
    trace(w.s->name() + " sends a stale outcome " + kind_name(kind)
          + " of job " + std::to_string(id) + " lease "
          + std::to_string(h.lease));
    store_step(
      w, [outs](storage::job_store& st) { return st.finish(outs, false); },
      [this, &w, outs](const std::vector<storage::finish_report>& reports) {
        if (reports[0].result == finish_result::applied)
          violated("stale_outcome_refused",
                   "outcome " + kind_name(outs[0].kind) + " of job "
                     + std::to_string(outs[0].job_id) + " with lost lease "
                     + std::to_string(outs[0].lease) + " was applied");
        else
          trace(w.s->name() + " stale outcome refused");
        agree(mirror_->finished(w.id, outs, reports, ms_of(w.s->started_at())));
      },
      traced(w, "stale outcome"));
  }

  void heartbeat_step(worker& w) {
    std::vector<int64_t> leases;
    std::vector<std::pair<int64_t, int64_t>> runs;  // for the model
    for (auto& [id, h] : w.held) {
      leases.push_back(h.lease);
      if (!h.in_doubt)
        runs.emplace_back(id, h.lease);
    }
    int64_t held = static_cast<int64_t>(w.held.size());
    trace(w.s->name() + " heartbeats " + std::to_string(leases.size())
          + " leases");
    store_step(
      w,
      [leases, held](storage::job_store& st) {
        st.refresh_node(held, false);
        return st.heartbeat(leases);
      },
      [this, &w, runs, held](const std::vector<int64_t>& mine) {
        w.refreshed = true;
        agree(mirror_->heartbeat(w.id, held, runs, mine));
        std::set<int64_t> still(mine.begin(), mine.end());
        for (auto it = w.held.begin(); it != w.held.end();) {
          if (!it->second.in_doubt && !still.count(it->second.lease)) {
            trace(w.s->name() + " lost job " + std::to_string(it->first)
                  + " lease " + std::to_string(it->second.lease));
            w.lost.emplace_back(it->first, it->second);
            it = w.held.erase(it);
          } else {
            ++it;
          }
        }
      },
      traced(w, "heartbeat"));
  }

  static std::vector<std::pair<int64_t, int64_t>>
  pairs_of(const std::vector<held_job>& jobs) {
    std::vector<std::pair<int64_t, int64_t>> out;
    for (auto& j : jobs)
      out.emplace_back(j.id, j.lease);
    return out;
  }

  static std::vector<held_job> held_jobs(const worker& w,
                                         const std::vector<int64_t>& ids) {
    std::vector<held_job> out;
    for (auto id : ids)
      out.push_back({id, w.held.at(id).lease, 0});
    return out;
  }

  void release_step(worker& w, const std::vector<int64_t>& live) {
    auto jobs = held_jobs(w, live);
    bool started = chance(50);
    trace(w.s->name() + " releases " + std::to_string(jobs.size()) + " jobs");
    for (auto& j : jobs)
      w.held[j.id].in_doubt = true;
    auto settle_jobs = [this, &w, jobs](bool gone) {
      for (auto& j : jobs) {
        auto it = w.held.find(j.id);
        if (it == w.held.end() || it->second.lease != j.lease)
          continue;
        if (gone) {
          w.lost.emplace_back(it->first, it->second);
          w.held.erase(it);
        } else {
          it->second.in_doubt = false;
        }
      }
    };
    store_step(
      w, [jobs, started](storage::job_store& st) { return st.release(jobs, started); },
      [this, &w, settle_jobs, jobs, started](int64_t n) {
        trace(w.s->name() + " released " + std::to_string(n));
        mirror_->released(w.id, pairs_of(jobs), started);
        settle_jobs(true);
      },
      [this, &w, settle_jobs](bool broken, const std::string& what) {
        trace(w.s->name() + " release failed: " + first_line(what));
        after_failure(w, broken, "release");
        // Broken: perhaps released. Refused: still held.
        settle_jobs(broken);
      });
  }

  void record_starts_step(worker& w, const std::vector<int64_t>& live) {
    auto jobs = held_jobs(w, live);
    trace(w.s->name() + " records " + std::to_string(jobs.size())
          + " starts");
    store_step(
      w,
      [jobs](storage::job_store& st) {
        st.record_starts(jobs);
        return true;
      },
      [this, jobs](bool) { mirror_->started(pairs_of(jobs)); },
      traced(w, "record_starts"));
  }

  void rescue_step(worker& w) {
    // The leases a rescue must leave alone: claimed inside the window, or
    // of a worker that refreshed its row since the clock last jumped (and
    // is not refreshing it right now).
    std::set<int64_t> protect;
    for (auto& o : workers_)
      for (auto& [id, h] : o.held)
        if (h.recent || (o.refreshed && !in_flight_.count(o.s.get())))
          protect.insert(h.lease);
    // The real rescue skips rows another transaction holds locked, which
    // the model cannot follow. The comparison stops now, not when the
    // rescue's answer is read: a rescue that waits behind a step in flight
    // may go on when that step gives up by itself (a ring round's lock
    // timeout), and take back claims while later steps run; their
    // outcomes, refused as stale, would be compared with a model not yet
    // told of the rescue (the CI run of 2026-12-07, seed 151). So does a
    // rescue that had to wait for a lock.
    if (!in_flight_.empty() || (holder_.open && holder_mode_ == 1))
      mirror_->diverge("a rescue ran while rows were locked");
    trace(w.s->name() + " rescues");
    store_step(
      w, [](storage::job_store& st) { return st.rescue(50); },
      [this, &w, protect](const std::vector<rescued_job>& got) {
        trace(w.s->name() + " rescued " + std::to_string(got.size())
              + " charged");
        after_rescue(protect);
        mirror_->rescued();
      },
      [this, &w](bool broken, const std::string& what) {
        trace(w.s->name() + " rescue failed: " + first_line(what));
        after_failure(w, broken, "rescue");
        if (broken)
          after_rescue({});
      });
    if (in_flight_.count(w.s.get()))
      mirror_->diverge("a rescue waited on a lock");
  }

  /// The runs a rescue took back leave their workers; one of `protect`
  /// must not have been.
  void after_rescue(const std::set<int64_t>& protect) {
    for (auto& o : workers_)
      for (auto it = o.held.begin(); it != o.held.end();) {
        if (!checks_.lease_taken_back(it->second.lease)) {
          ++it;
          continue;
        }
        if (protect.count(it->second.lease))
          violated("no_rescue_of_live_lease",
                   "lease " + std::to_string(it->second.lease) + " of "
                     + o.id + " (job " + std::to_string(it->first)
                     + ") was taken back though "
                     + (it->second.recent ? "claimed inside its window"
                                          : "its worker heartbeated since"));
        o.lost.emplace_back(it->first, it->second);
        it = o.held.erase(it);
      }
  }

  void ring_step(worker& w) {
    trace(w.s->name() + " runs a ring round");
    store_step(
      w, [](storage::job_store& st) { return st.vacuum(INT64_MAX, 1e18); },
      [this, &w](const std::vector<std::string>& done) {
        for (auto& line : done)
          trace(w.s->name() + " ring: " + line);
      },
      traced(w, "ring"));
  }

  // -- enqueuers -----------------------------------------------------------

  void enqueuer_step(enqueuer& e) {
    if (!e.open)
      return begin_step(e);
    int r = pick(100);
    if (r < 30)
      return insert_step(e, false);
    if (r < 45)
      return insert_step(e, true);
    if (r < 85)
      return end_step(e, true);
    return end_step(e, false);
  }

  void begin_step(enqueuer& e) {
    trace(e.s->name() + " begins");
    e.open = true;
    e.pending.clear();
    bool reconnect = e.reconnect;
    e.reconnect = false;
    release(*e.s, [this, &e, reconnect]() -> continuation {
      try {
        e.tx.reset();
        if (reconnect)
          e.conn.reset();
        if (!e.conn || !e.conn->is_open())
          e.conn = std::make_unique<pqxx::connection>(opts_.url);
        e.s->set_pid(e.conn->backendpid());
        e.tx = std::make_unique<pqxx::work>(*e.conn, "aw_sim_enqueue");
        return [] {};
      } catch (const std::exception& ex) {
        e.conn.reset();
        std::string what = ex.what();
        return [this, &e, what] {
          e.open = false;
          trace(e.s->name() + " begin failed: " + first_line(what));
        };
      }
    }, true);
  }

  void insert_step(enqueuer& e, bool copy) {
    int n = 1 + pick(3);
    std::vector<std::string> tokens;
    std::vector<std::string> kinds;
    std::vector<int> priorities;
    std::vector<bool> later;
    for (int i = 0; i < n; ++i) {
      tokens.push_back("s" + std::to_string(opts_.seed) + "-"
                       + std::to_string(next_token_++));
      kinds.push_back(chance(40) ? "fu" : "plain");
      priorities.push_back(pick(2));
      later.push_back(!copy && chance(15));
    }
    std::string what;
    for (size_t i = 0; i < tokens.size(); ++i) {
      what += " " + tokens[i];
      token_info_[tokens[i]] = {kinds[i], priorities[i], later[i]};
    }
    trace(e.s->name() + (copy ? " copies" : " inserts") + what);
    release(*e.s, [this, &e, copy, tokens, kinds, priorities,
                   later]() -> continuation {
      try {
        e.s->set_pid(e.conn->backendpid());
        if (copy) {
          pqxx::stream_to out(*e.tx, "jobs_in",
                              std::vector<std::string>{"kind", "queue", "args",
                                                       "priority"});
          for (size_t i = 0; i < tokens.size(); ++i)
            out << std::make_tuple(kinds[i], std::string{queue_name},
                                   nlohmann::json{{"t", tokens[i]}}.dump(),
                                   priorities[i]);
          out.complete();
        } else {
          for (size_t i = 0; i < tokens.size(); ++i)
            e.tx->exec_params(
              later[i]
                ? "INSERT INTO jobs_in (kind, queue, args, priority, state,"
                  " run_at) VALUES ($1, $2, $3::jsonb, $4, 'scheduled',"
                  " now() + interval '10 minutes')"
                : "INSERT INTO jobs_in (kind, queue, args, priority)"
                  " VALUES ($1, $2, $3::jsonb, $4)",
              kinds[i], queue_name, nlohmann::json{{"t", tokens[i]}}.dump(),
              priorities[i]);
        }
        return [this, &e, tokens] {
          for (auto& t : tokens)
            e.pending.push_back(t);
        };
      } catch (const std::exception& ex) {
        std::string what = ex.what();
        return [this, &e, what] {
          trace(e.s->name() + " insert failed: " + first_line(what));
          // The transaction is lost: what it inserted never commits.
          for (auto& t : e.pending)
            tokens_.rolled_back(t);
          e.pending.clear();
          e.open = false;
          e.reconnect = true;
        };
      }
    }, true);
  }

  /// The model's copies of jobs just committed, in id order.
  void mirror_enqueued(const std::vector<std::string>& tokens) {
    if (tokens.empty() || mirror_->diverged())
      return;
    std::vector<std::string> list(tokens.begin(), tokens.end());
    pqxx::nontransaction q(control_, "aw_sim_ids");
    for (const auto& row : q.exec_params(
           "SELECT id, args->>'t' FROM jobs_in WHERE args->>'t' = ANY ($1::text[])"
           " ORDER BY id",
           storage::to_text_array_literal(list))) {
      auto& info = token_info_.at(row[1].as<std::string>());
      mirror_->enqueued(row[0].as<int64_t>(), info.kind, info.priority,
                        info.later ? 600'000 : 0);
    }
  }

  void end_step(enqueuer& e, bool commit) {
    trace(e.s->name() + (commit ? " commits" : " rolls back"));
    release(*e.s, [this, &e, commit]() -> continuation {
      try {
        e.s->set_pid(e.conn->backendpid());
        if (commit)
          e.tx->commit();
        else
          e.tx->abort();
        e.tx.reset();
        return [this, &e, commit] {
          for (auto& t : e.pending)
            commit ? tokens_.committed(t) : tokens_.rolled_back(t);
          if (commit)
            mirror_enqueued(e.pending);
          e.pending.clear();
          e.open = false;
        };
      } catch (const std::exception& ex) {
        bool broken = connection_error(ex);
        std::string what = ex.what();
        e.tx.reset();
        if (broken)
          e.conn.reset();
        return [this, &e, commit, broken, what] {
          trace(e.s->name() + " end failed: " + first_line(what));
          // A commit whose connection broke may have happened.
          for (auto& t : e.pending)
            commit && broken ? tokens_.in_doubt(t) : tokens_.rolled_back(t);
          if (commit && broken && !e.pending.empty())
            mirror_->diverge(e.s->name() + "'s commit is in doubt");
          e.pending.clear();
          e.open = false;
        };
      }
    });
  }

  // -- the holder, kills, the clock --------------------------------------

  /// The holder opens a transaction and leaves it open until its next
  /// step: a snapshot (an operator's long read), row locks on a few jobs
  /// (an operator's UPDATE under way: outcomes, rescues and releases of
  /// them wait), or a lane's claim lock (a stuck claim: claims of that
  /// lane wait up to 2 s, then skip it).
  void holder_step() {
    bool opening = !holder_.open;
    int mode = opening ? pick(3) : -1;
    static const char* const what[] = {"opens a snapshot",
                                       "locks two jobs' rows",
                                       "takes lane (q, 0)'s claim lock"};
    trace(std::string{"h "} + (opening ? what[mode] : "ends it"));
    holder_.open = opening;
    holder_mode_ = mode;
    release(*holder_.s, [this, mode]() -> continuation {
      try {
        if (mode >= 0) {
          if (!holder_.conn || !holder_.conn->is_open())
            holder_.conn = std::make_unique<pqxx::connection>(opts_.url);
          holder_.s->set_pid(holder_.conn->backendpid());
          holder_.tx = std::make_unique<pqxx::work>(*holder_.conn, "aw_sim_hold");
          holder_.tx->exec("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ");
          if (mode == 0)
            holder_.tx->exec("SELECT count(*) FROM jobs_in");
          else if (mode == 1)
            holder_.tx->exec("SELECT id FROM jobs_in ORDER BY id DESC LIMIT 2"
                             " FOR UPDATE SKIP LOCKED");
          else
            holder_.tx->exec("SELECT pg_advisory_xact_lock(hashtext('q'), 0)");
        } else {
          holder_.tx->commit();
          holder_.tx.reset();
        }
      } catch (const std::exception& e) {
        std::string why = e.what();
        holder_.tx.reset();
        holder_.conn.reset();
        return [this, why] {
          holder_.open = false;
          trace("h failed: " + first_line(why));
        };
      }
      return [] {};
    }, true);
  }

  void kill_step() {
    std::vector<session*> targets;
    for (int i = 0; i < random_workers; ++i)
      targets.push_back(workers_[i].s.get());
    for (auto& e : enqueuers_)
      targets.push_back(e.s.get());
    auto* s = targets[pick(static_cast<int>(targets.size()))];
    // The server process of its last step (its connection, unless that
    // one broke already).
    int pid = s->pid();
    if (pid == 0)
      return;
    trace("kill " + s->name() + " (pid " + std::to_string(pid) + ")"
          + (s->busy() ? " mid-step" : ""));
    ++result_.kills;
    pqxx::nontransaction q(control_);
    // Not waiting for it to go: its session finds out at its next
    // statement, or mid-statement, as a client does.
    q.exec_params("SELECT pg_terminate_backend($1)", pid);
    // An enqueuer idle in its transaction lost it: rolled back.
    for (auto& w : workers_)
      if (w.s.get() == s && !s->busy())
        w.killed_idle = true;
    for (auto& e : enqueuers_)
      if (e.s.get() == s && !s->busy()) {
        for (auto& t : e.pending)
          tokens_.rolled_back(t);
        e.pending.clear();
        e.open = false;
        e.reconnect = true;
      }
  }

  void jump_step() {
    trace("the clock jumps " + std::string{jump});
    pqxx::work tx(control_, "aw_sim_jump");
    tx.exec("SET LOCAL lock_timeout = '2s'");
    tx.exec(std::string{"UPDATE worker_nodes SET last_seen_at = last_seen_at - interval '"}
            + jump + "'");
    tx.exec(std::string{"UPDATE job_batches SET claimed_at = claimed_at - interval '"}
            + jump + "'");
    // A row the holder locked keeps its time (as if its jump came later).
    tx.exec(std::string{"UPDATE jobs_in SET run_at = run_at - interval '"} + jump
            + "' WHERE id IN (SELECT id FROM jobs_in WHERE ready_xid = '0'"
              " AND state IN ('scheduled', 'available') AND run_at > now()"
              " FOR UPDATE SKIP LOCKED)");
    tx.commit();
    mirror_->jump(3'600'000);
    for (auto& w : workers_) {
      w.refreshed = false;
      for (auto& [id, h] : w.held)
        h.recent = false;
    }
  }

  // -- the drain ---------------------------------------------------------

  /// Ends every transaction, lets the clock pass every window and drains
  /// the queue with a fresh worker: every job must end (no_job_lost).
  void drain() {
    step_ = -1;
    trace("drain");
    // Idle transactions end first (steps in flight may wait for them),
    // then those whose step was in flight (it may have opened one).
    for (int round = 0; round < 3; ++round) {
      for (auto& e : enqueuers_)
        if (e.open && !e.s->busy())
          end_step(e, round > 0 || chance(70));
      if (holder_.open && !holder_.s->busy())
        holder_step();
      settle();
    }
    for (auto& w : workers_)
      if (!w.resend.empty())
        finish_step(w, w.resend, true);
    settle();
    if (!result_.violations.empty())
      return;
    auto& d = workers_.back();
    for (int round = 0, empty = 0; round < 30 && empty < 2; ++round) {
      jump_step();
      rescue_step(d);
      claim_all(d);
      if (d.held.empty()) {
        ++empty;
        continue;
      }
      empty = 0;
      std::vector<job_outcome> outs;
      for (auto& [id, h] : d.held)
        outs.push_back(outcome_of(id, h, outcome_kind::completed));
      finish_step(d, outs, false);
      settle();
    }
    for (auto& v : checks_.after_drain(tokens_))
      violated(v.first, v.second);
    if (!result_.violations.empty())
      return;
    if (mirror_->diverged()) {
      trace("the model stopped following: " + mirror_->why());
      ++result_.unmirrored;
      return;
    }
    for (auto& d : mirror_->ended(checks_.ends()))
      violated("model_agreement", d);
  }

  void claim_all(worker& d) {
    for (int i = 0; i < 20; ++i) {
      size_t before = d.held.size();
      store_step(
        d, [](storage::job_store& st) { return st.claim(queue_name, 100); },
        [this, &d](const claim_result& got) { on_claimed(d, got); },
        traced(d, "claim"));
      settle();
      if (d.held.size() == before)
        return;
    }
  }

  schedule_options opts_;
  std::mt19937_64 rng_;
  pqxx::connection control_;
  checks checks_;
  token_book tokens_;
  // A deque: steps in flight hold references to its workers.
  std::deque<worker> workers_;
  std::vector<enqueuer> enqueuers_;
  holder holder_;
  int step_ = 0;
  int next_token_ = 0;
  /// What the holder holds open (holder_step's modes; -1: nothing).
  int holder_mode_ = -1;
  /// The model, following this schedule.
  std::unique_ptr<model_mirror> mirror_;
  /// What each token's job is: kind, priority, and whether it was
  /// scheduled for later (for the model's copy of it).
  struct job_info {
    std::string kind;
    int priority = 0;
    bool later = false;
  };
  std::map<std::string, job_info> token_info_;
  clock_type::time_point began_ = clock_type::now();
  schedule_result result_;
};


void reset_database(pqxx::connection_base& conn) {
  pqxx::work tx(conn, "aw_sim_reset");
  // DELETE, not TRUNCATE: a schedule leaves a few dozen rows, and a
  // TRUNCATE of every partition cost 1.4 s (a new file and an fsync each).
  for (const char* table : {"jobs_in", "job_batches", "batch_receipts",
                            "job_starts", "worker_nodes", "dead_letter_jobs"})
    tx.exec(std::string{"DELETE FROM "} + table);
  // The same ids for the same seed, whichever seeds ran before.
  tx.exec("SELECT setval(pg_get_serial_sequence('jobs_in', 'id'), 1, false),"
          " setval(pg_get_serial_sequence('dead_letter_jobs', 'id'), 1, false)");
  tx.exec("UPDATE job_ring SET period = interval '6 hours', recycled_at = '{}'");
  tx.exec("SELECT actor_worker_ring_rebuild(21600)");
  tx.commit();
}

runner::runner(const std::string& url) : impl_(new schedule(url)) {
  // nop
}

runner::~runner() = default;

schedule_result runner::run(const schedule_options& opts) {
  return impl_->run(opts);
}

} // namespace aw::sim::sql
