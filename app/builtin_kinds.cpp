#include "actor_worker/app/builtin_kinds.hpp"

#include <memory>
#include <optional>
#include <thread>
#include <utility>

#include <pqxx/pqxx>

#include "actor_worker/app/registry.hpp"
#include "actor_worker/config/config.hpp"

namespace aw {

namespace {

struct sleep_args {
  int64_t ms = 0;
};

void from_json(const nlohmann::json& j, sleep_args& a) {
  j.at("ms").get_to(a.ms);
  if (a.ms < 0)
    throw std::invalid_argument("\"ms\" must not be negative");
}

struct fail_args {
  std::optional<int> times;
  bool terminal = false;
  std::string message = "failed on purpose";
};

void from_json(const nlohmann::json& j, fail_args& a) {
  if (!j.is_object())
    throw std::invalid_argument("expected a JSON object");
  if (j.contains("times"))
    a.times = j.at("times").get<int>();
  if (j.contains("terminal"))
    a.terminal = j.at("terminal").get<bool>();
  if (j.contains("message"))
    a.message = j.at("message").get<std::string>();
}

struct record_args {
  int64_t ms = 0;
};

void from_json(const nlohmann::json& j, record_args& a) {
  if (!j.is_object())
    throw std::invalid_argument("expected a JSON object");
  if (j.contains("ms"))
    j.at("ms").get_to(a.ms);
  if (a.ms < 0)
    throw std::invalid_argument("\"ms\" must not be negative");
}

/// The `record` kind's connection: one per pool thread, opened on first use
/// and dropped after any error (the next run reconnects), so a database
/// restart costs the runs that were in flight, not the thread.
class record_connection {
public:
  template <class F>
  static auto with(const std::string& url, F fn) {
    // Outside the template: one connection per thread for every call site
    // (a thread_local in with<F> would be one per lambda, and the one of
    // the run's second statement would still point at a server that went
    // away after the first one reconnected).
    auto& [conn, conn_url] = thread_state();
    try {
      if (!conn || conn_url != url || !conn->is_open()) {
        conn.reset();
        conn = std::make_unique<pqxx::connection>(url);
        conn_url = url;
      }
      return fn(*conn);
    } catch (const pqxx::undefined_table&) {
      conn.reset();
      throw terminal_error("record: table job_executions does not exist; "
                           "create it first (see app/builtin_kinds.hpp)");
    } catch (...) {
      conn.reset();
      throw;
    }
  }

private:
  static std::pair<std::unique_ptr<pqxx::connection>, std::string>& thread_state() {
    thread_local std::pair<std::unique_ptr<pqxx::connection>, std::string> state;
    return state;
  }
};

void run_record(const std::string& url, const record_args& a,
                const job_context& ctx) {
  auto execution = record_connection::with(url, [&](pqxx::connection& c) {
    pqxx::nontransaction tx{c};
    auto rows = tx.exec_params(
      "INSERT INTO job_executions (job_id, attempt, worker) "
      "SELECT $1, $2, coalesce((SELECT locked_by FROM jobs WHERE id = $1), "
      "'?') "
      "RETURNING id",
      ctx.id, ctx.attempt);
    return rows.at(0).at(0).as<int64_t>();
  });
  if (!ctx.cancel.sleep_for(std::chrono::milliseconds{a.ms}))
    throw std::runtime_error("record cancelled: " + ctx.cancel.reason());
  record_connection::with(url, [&](pqxx::connection& c) {
    pqxx::nontransaction tx{c};
    tx.exec_params("UPDATE job_executions SET finished_at = clock_timestamp() "
                   "WHERE id = $1",
                   execution);
    return 0;
  });
}

struct await_args {
  std::chrono::milliseconds timeout = defaults::callback_timeout;
};

void from_json(const nlohmann::json& j, await_args& a) {
  if (!j.is_object())
    throw std::invalid_argument("expected a JSON object");
  if (j.contains("timeout"))
    a.timeout = parse_duration(j.at("timeout").get<std::string>());
}

} // namespace

void register_builtin_kinds(registry& reg, const std::string& database_url) {
  register_builtin_kinds(reg);
  reg.add<record_args>("record", [database_url](const record_args& a,
                                                const job_context& ctx) {
    run_record(database_url, a, ctx);
  });
  // The same record, written in the run's own transaction: it exists
  // exactly when the job's outcome committed (the fault tests count it).
  reg.add_transactional<record_args>(
    "record_tx",
    [](const record_args& a, const job_context& ctx, pqxx::work& tx) {
      // The worker: what its transaction says it writes as (through the
      // `jobs` view this planned every state's branch per job: 8 ms, more
      // than the rest of the run).
      tx.exec_params("INSERT INTO job_executions (job_id, attempt, worker, "
                     "finished_at) VALUES ($1, $2, coalesce(current_setting("
                     "'actor_worker.worker', true), '?'), clock_timestamp())",
                     ctx.id, ctx.attempt);
      if (a.ms > 0)
        tx.exec_params("SELECT pg_sleep($1::double precision / 1000)", a.ms);
    });
}

void register_builtin_kinds(registry& reg) {
  // Does nothing, so never blocks: runs inline, without a thread hand-off.
  reg.add_raw(
    "noop", [](const nlohmann::json&, const job_context&) {}, non_blocking);
  // Does nothing in a transaction of its own that commits its completion:
  // the cost of a transactional handler itself (bench/transactional.sh).
  reg.add_transactional<nlohmann::json>(
    "noop_tx", [](const nlohmann::json&, const job_context&, pqxx::work&) {});
  // Waits on a timer, not on a thread: ten thousand sleeping jobs need no
  // ten thousand threads. Honours cancellation at once (deadline, lost
  // lease, shutdown).
  reg.add_async<sleep_args>("sleep", [](const sleep_args& a,
                                        const async_context& ctx,
                                        job_promise done) {
    ctx.cancel.on_cancel([done](const std::string& why) {
      done.fail("sleep cancelled: " + why);
    });
    ctx.after(std::chrono::milliseconds{a.ms}, [done] { done.complete(); });
  });
  reg.add<await_args>(
    "await_callback",
    [](const await_args& a, const job_context&) {
      return outcome::wait_for_callback(a.timeout);
    },
    non_blocking);
  reg.add<fail_args>(
    "fail",
    [](const fail_args& a, const job_context& ctx) {
      if (a.times && ctx.error_count >= *a.times)
        return;
      if (a.terminal)
        throw terminal_error(a.message);
      throw std::runtime_error(a.message);
    },
    non_blocking);
}

} // namespace aw
