#pragma once
// The dashboard's implementation (app/dashboard.hpp), shared by its
// sources, one per part of the API:
//
//   app/dashboard.cpp          the routes, the checks every request passes
//                              and the databases a request may name
//   app/dashboard_pages.cpp    the pages' reads: session, overview, nodes,
//                              schedules
//   app/dashboard_lists.cpp    the keyset lists and single rows: jobs, dead
//                              letters, failure groups, the audit log
//   app/dashboard_actions.cpp  the audited actions: retry, cancel, purge,
//                              pause and resume
//
// Internal to aw_runtime: not installed (it needs cpp-httplib and libpqxx,
// which the public header does not).

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include "actor_worker/app/dashboard.hpp"
#include "actor_worker/app/dashboard_pool.hpp"
#include "actor_worker/app/dashboard_security.hpp"
#include "actor_worker/app/prometheus_observer.hpp"
#include "actor_worker/messages/printable.hpp"
#include "actor_worker/storage/admin_dead_letters.hpp"
#include "actor_worker/storage/dashboard_queries.hpp"

namespace aw {

/// The helpers of the dashboard's handlers: request parameters, JSON
/// answers.
namespace dashboard_internal {

using json = nlohmann::json;

/// A request the handler refuses, with its status.
struct bad_request : std::runtime_error {
  int status;
  bad_request(int s, const std::string& message)
    : std::runtime_error(message), status(s) {
  }
};

void send_json(httplib::Response& res, int status, const std::string& body);

void send_json(httplib::Response& res, int status, const json& body);

void send_error(httplib::Response& res, int status, const std::string& error);

int64_t parse_int(const std::string& text, const char* what, int64_t min,
                  int64_t max);

int64_t param_int(const httplib::Request& req, const char* name,
                  int64_t fallback, int64_t min, int64_t max);

/// Where a keyset page starts (`before`: ids below it; 0 = the newest)
/// and how many rows it has (`limit`: 1 to 500, default 50).
struct page_params {
  int64_t before = 0;
  int64_t limit = 50;
};

page_params page_of(const httplib::Request& req);

/// A text filter: at most 1,000 bytes (names are at most 200; a
/// fingerprint 300 characters).
std::string param_text(const httplib::Request& req, const char* name);

/// Every query parameter is text PostgreSQL can take: UTF-8 (else the
/// statement fails, a 500 and an ERROR in the log), without NUL (a
/// parameter is a C string to libpq: "%00default" would filter by "",
/// that is not at all). Throws bad_request (400) naming the parameter.
void check_params(const httplib::Request& req);

int64_t path_id(const httplib::Request& req);

/// `{"rows": [...], "next_before": N|null, "partial": bool}` under `key`.
std::string page_json(const char* key, const storage::dashboard_page& page);

double unix_seconds(std::chrono::system_clock::time_point t);

} // namespace dashboard_internal

struct dashboard::impl {
  using json = dashboard_internal::json;

  /// What the dashboard keeps of one configured database.
  struct database_state {
    /// "default" ([database]) or a [databases.NAME] name.
    std::string name;
    /// The configuration as the node runs it against this database: its
    /// settings as [database], and only the queues and periodic schedules
    /// that live there.
    runtime_config part;
    /// A few connections of its own, opened on first use.
    dashboard_pool pool;
    /// The overview's own sample of the database's queues while this node
    /// does not lead it (only the leader's maintenance samples them): read
    /// on demand, at most once per queue_stats_interval.
    std::mutex own_sample_mtx;
    queue_snapshot own_sample;

    database_state(const runtime_config& cfg, std::string n)
      : name(std::move(n)), part(cfg.for_database(name)),
        pool(part.database.url, part.database.pooler != "transaction", 3) {
    }
  };

  runtime_config cfg;
  dashboard_node node;
  std::shared_ptr<const prometheus_observer> metrics;
  dashboard_policy policy;
  /// Every configured database, "default" first (fixed after the
  /// constructor, so requests read it without a lock).
  std::vector<std::unique_ptr<database_state>> databases;

  impl(const runtime_config& c, dashboard_node n,
       std::shared_ptr<const prometheus_observer> m)
    : cfg(c), node(std::move(n)), metrics(std::move(m)),
      policy(dashboard_policy::from(c.http, c.http.resolve_token())) {
    for (auto& name : cfg.database_names())
      databases.push_back(std::make_unique<database_state>(cfg, name));
  }

  // -- the request ----------------------------------------------------------

  /// The database a request names with `database=NAME` (absent or empty:
  /// the default one). An unknown name is refused with 400, listing the
  /// configured names (never their URLs).
  database_state& database_for(const httplib::Request& req);

  /// " (database 'NAME')" for the messages about a request's database when
  /// the node has several; "" with one, so its messages read as always.
  std::string about_database(const httplib::Request& req) const;

  /// " in database 'NAME'" for a not-found message when the node has
  /// several databases (the id may be in another); "" with one.
  std::string in_database(const database_state& db) const;

  using handler = std::function<void(const httplib::Request&,
                                     httplib::Response&)>;

  /// Runs `h` for `req` after the checks; turns errors into JSON answers.
  void serve(const httplib::Request& req, httplib::Response& res,
             dashboard_access access, const handler& h);

  /// Runs `fn(conn)` on a pooled connection to `db`; a broken one is
  /// dropped.
  template <class F>
  auto with_db(database_state& db, F&& fn) {
    auto lease = db.pool.take();
    try {
      return fn(*lease);
    } catch (const pqxx::broken_connection&) {
      lease.broken();
      throw;
    } catch (const pqxx::in_doubt_error&) {
      lease.broken();
      throw;
    }
  }

  // -- reads: the pages (app/dashboard_pages.cpp) -----------------------------

  void session(const httplib::Request& req, httplib::Response& res);

  /// `db`'s sample: its leader's when this node leads it; otherwise one of
  /// the dashboard's own, no older than the sample interval.
  queue_snapshot queue_sample(database_state& db);

  /// The node's throughput ring, of the queues that live in `db` only.
  json throughput_of(const database_state& db) const;

  void overview(const httplib::Request& req, httplib::Response& res);

  void nodes(const httplib::Request& req, httplib::Response& res);

  void schedules(const httplib::Request& req, httplib::Response& res);

  // -- reads: lists and rows (app/dashboard_lists.cpp) ------------------------

  void jobs(const httplib::Request& req, httplib::Response& res);

  void job(const httplib::Request& req, httplib::Response& res);

  storage::dead_letter_filter
  dead_letter_filter_of(const httplib::Request& req);

  void dead_letters(const httplib::Request& req, httplib::Response& res);

  void dead_letter(const httplib::Request& req, httplib::Response& res);

  void dead_letter_count(const httplib::Request& req, httplib::Response& res);

  void failures(const httplib::Request& req, httplib::Response& res);

  void audit(const httplib::Request& req, httplib::Response& res);

  // -- actions (app/dashboard_actions.cpp) ------------------------------------

  /// Runs an action in one transaction with its audit row: `fn(tx, entry)`
  /// does the work, fills the entry's outcome, affected and job ids, and
  /// returns the status and body to answer.
  template <class F>
  void act(const httplib::Request& req, httplib::Response& res,
           database_state& db, const std::string& action, const json& target,
           F&& fn) {
    storage::audit_entry entry;
    entry.action = action;
    entry.target_json = target.dump();
    entry.remote_addr = req.remote_addr;
    entry.user_agent = req.get_header_value("User-Agent").substr(0, 300);
    entry.worker = node.worker_id;
    // The action and its audit row commit together, in the database the
    // request named.
    auto [status, body] = with_db(db, [&](pqxx::connection& c) {
      pqxx::work tx{c, "aw_dashboard_action"};
      // Bulk actions move many rows; they get longer than a read.
      tx.exec("SET LOCAL statement_timeout = '300s'");
      auto answer = fn(tx, entry);
      answer.second["audit_id"] = storage::write_audit(tx, entry);
      tx.commit();
      return answer;
    });
    spdlog::info("dashboard: {} {}{} from {}: {}", action,
                 printable(entry.target_json), about_database(req),
                 req.remote_addr, printable(entry.outcome));
    dashboard_internal::send_json(res, status, body);
  }

  /// The JSON object of an action's body (may be empty: {}).
  static json body_of(const httplib::Request& req);

  void job_retry(const httplib::Request& req, httplib::Response& res);

  /// POST /api/queues/pause and /api/queues/resume, body {"queue": "Q"}:
  /// `actor-worker queues pause|resume Q`, audited. A queue the database
  /// does not know (no queue_controls row, no job, no dead letter) and this
  /// node does not serve is refused with 404, nothing changed; one that
  /// lives in another database than the request's, with 400.
  void queue_control(const httplib::Request& req, httplib::Response& res,
                     bool pause);

  void queue_pause(const httplib::Request& req, httplib::Response& res);

  void queue_resume(const httplib::Request& req, httplib::Response& res);

  void job_cancel(const httplib::Request& req, httplib::Response& res);

  void retry_dead_letters(const httplib::Request& req, httplib::Response& res,
                          database_state& db,
                          const storage::dead_letter_filter& f,
                          const json& target);

  void purge_dead_letters(const httplib::Request& req, httplib::Response& res,
                          database_state& db,
                          const storage::dead_letter_filter& f,
                          const json& target);

  void dead_letter_retry(const httplib::Request& req, httplib::Response& res);

  void dead_letter_purge(const httplib::Request& req, httplib::Response& res);

  /// A bulk action's filter: {"queue", "kind", "fingerprint"} (strings),
  /// or {"all": true} for every dead letter.
  static std::pair<storage::dead_letter_filter, json>
  bulk_filter(const httplib::Request& req);

  void dead_letters_retry(const httplib::Request& req, httplib::Response& res);

  void dead_letters_purge(const httplib::Request& req, httplib::Response& res);
};

} // namespace aw
