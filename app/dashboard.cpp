#include "actor_worker/app/dashboard.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <mutex>

#include <httplib.h>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include "actor_worker/app/dashboard_assets.hpp"
#include "actor_worker/app/dashboard_pool.hpp"
#include "actor_worker/app/dashboard_security.hpp"
#include "actor_worker/app/periodic_status.hpp"
#include "actor_worker/app/prometheus_observer.hpp"
#include "actor_worker/app/utf8.hpp"
#include "actor_worker/config/seconds.hpp"
#include "actor_worker/messages/printable.hpp"
#include "actor_worker/storage/admin_dead_letters.hpp"
#include "actor_worker/storage/admin_jobs.hpp"
#include "actor_worker/storage/admin_nodes.hpp"
#include "actor_worker/storage/admin_queues.hpp"
#include "actor_worker/storage/dashboard_queries.hpp"
#include "actor_worker/storage/periodic_schedules.hpp"

namespace aw {

namespace {

using json = nlohmann::json;

constexpr const char* json_type = "application/json";

/// A request the handler refuses, with its status.
struct bad_request : std::runtime_error {
  int status;
  bad_request(int s, const std::string& message)
    : std::runtime_error(message), status(s) {
  }
};

void send_json(httplib::Response& res, int status, const std::string& body) {
  res.status = status;
  res.set_content(body, json_type);
}

void send_json(httplib::Response& res, int status, const json& body) {
  send_json(res, status, body.dump());
}

void send_error(httplib::Response& res, int status, const std::string& error) {
  send_json(res, status, json{{"error", error}});
}

int64_t parse_int(const std::string& text, const char* what, int64_t min,
                  int64_t max) {
  if (text.empty() || text.size() > 18
      || !std::all_of(text.begin(), text.end(),
                      [](char c) { return c >= '0' && c <= '9'; }))
    throw bad_request(400, std::string{what} + " must be a whole number");
  auto v = std::stoll(text);
  if (v < min || v > max)
    throw bad_request(400, std::string{what} + " must be from "
                             + std::to_string(min) + " to "
                             + std::to_string(max));
  return v;
}

int64_t param_int(const httplib::Request& req, const char* name,
                  int64_t fallback, int64_t min, int64_t max) {
  if (!req.has_param(name))
    return fallback;
  auto text = req.get_param_value(name);
  if (text.empty())
    return fallback;
  return parse_int(text, name, min, max);
}

/// Where a keyset page starts (`before`: ids below it; 0 = the newest)
/// and how many rows it has (`limit`: 1 to 500, default 50).
struct page_params {
  int64_t before = 0;
  int64_t limit = 50;
};

page_params page_of(const httplib::Request& req) {
  return {param_int(req, "before", 0, 0, std::numeric_limits<int64_t>::max()),
          param_int(req, "limit", 50, 1, 500)};
}

/// A text filter: at most 1,000 bytes (names are at most 200; a
/// fingerprint 300 characters).
std::string param_text(const httplib::Request& req, const char* name) {
  if (!req.has_param(name))
    return {};
  auto text = req.get_param_value(name);
  if (text.size() > 1000)
    throw bad_request(400, std::string{name} + " is too long");
  return text;
}

/// Every query parameter is text PostgreSQL can take: UTF-8 (else the
/// statement fails, a 500 and an ERROR in the log), without NUL (a
/// parameter is a C string to libpq: "%00default" would filter by "",
/// that is not at all). Throws bad_request (400) naming the parameter.
void check_params(const httplib::Request& req) {
  for (auto& [name, value] : req.params) {
    if (!valid_utf8(name) || !valid_utf8(value))
      throw bad_request(400, "the query parameter '" + printable(name)
                               + "' is not valid UTF-8");
    if (name.find('\0') != std::string::npos
        || value.find('\0') != std::string::npos)
      throw bad_request(400, "the query parameter '" + printable(name)
                               + "' holds a NUL character (%00)");
  }
}

int64_t path_id(const httplib::Request& req) {
  return parse_int(req.matches[1].str(), "the id", 1,
                   std::numeric_limits<int64_t>::max());
}

/// `{"rows": [...], "next_before": N|null, "partial": bool}` under `key`.
std::string page_json(const char* key, const storage::dashboard_page& page) {
  std::string out = "{\"";
  out += key;
  out += "\":";
  out += page.rows;
  out += ",\"next_before\":";
  out += page.next_before ? std::to_string(*page.next_before) : "null";
  out += ",\"partial\":";
  out += page.partial ? "true" : "false";
  out += "}";
  return out;
}

double unix_seconds(std::chrono::system_clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

} // namespace

struct dashboard::impl {
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

  /// The database a request names with `database=NAME` (absent or empty:
  /// the default one). An unknown name is refused with 400, listing the
  /// configured names (never their URLs).
  database_state& database_for(const httplib::Request& req) {
    auto name = param_text(req, "database");
    if (name.empty())
      return *databases.front();
    for (auto& db : databases)
      if (db->name == name)
        return *db;
    std::string names;
    for (auto& db : databases)
      names += (names.empty() ? "" : ", ") + db->name;
    throw bad_request(400, "no database named '" + name
                             + "' (the configured databases: " + names
                             + ")");
  }

  /// " (database 'NAME')" for the messages about a request's database when
  /// the node has several; "" with one, so its messages read as always.
  std::string about_database(const httplib::Request& req) const {
    if (!cfg.sharded())
      return {};
    auto name = req.has_param("database") ? req.get_param_value("database")
                                          : std::string{};
    return " (database '"
           + printable(name.empty() ? std::string{defaults::database_name}
                                    : name)
           + "')";
  }

  /// " in database 'NAME'" for a not-found message when the node has
  /// several databases (the id may be in another); "" with one.
  std::string in_database(const database_state& db) const {
    return cfg.sharded() ? " in database '" + db.name + "'" : std::string{};
  }

  using handler = std::function<void(const httplib::Request&,
                                     httplib::Response&)>;

  /// Runs `h` for `req` after the checks; turns errors into JSON answers.
  void serve(const httplib::Request& req, httplib::Response& res,
             dashboard_access access, const handler& h) {
    for (auto& [name, value] : security_headers())
      res.set_header(name.c_str(), value);
    request_facts facts;
    facts.method = req.method;
    facts.host = req.get_header_value("Host");
    facts.origin = req.get_header_value("Origin");
    facts.sec_fetch_site = req.get_header_value("Sec-Fetch-Site");
    facts.content_type = req.get_header_value("Content-Type");
    facts.authorization = req.get_header_value("Authorization");
    if (auto no = check_request(policy, facts, access)) {
      if (access == dashboard_access::action || no.status != 401)
        spdlog::warn("dashboard: refused {} {} from {}: {} {}", req.method,
                     printable(req.path), req.remote_addr, no.status,
                     no.error);
      if (no.status == 401)
        res.set_header("WWW-Authenticate", "Bearer");
      if (no.status == 405)
        res.set_header("Allow",
                       access == dashboard_access::action ? "POST" : "GET");
      send_error(res, no.status, no.error);
      return;
    }
    // The database errors below come from the database the request named
    // (an unknown name is a bad_request before any connection).
    try {
      check_params(req);
      h(req, res);
    } catch (const bad_request& e) {
      send_error(res, e.status, e.what());
    } catch (const dashboard_pool::busy& e) {
      send_error(res, 503, e.what() + about_database(req));
    } catch (const pqxx::broken_connection&) {
      send_error(res, 503, "database unreachable" + about_database(req));
    } catch (const pqxx::sql_error& e) {
      if (e.sqlstate() == "57014") {
        send_error(res, 503, "the database took too long to answer"
                               + about_database(req));
        return;
      }
      spdlog::error("dashboard: {} {}{}: {}", req.method, printable(req.path),
                    about_database(req), printable(e.what()));
      send_error(res, 500, "database error (see the worker's log)");
    } catch (const std::exception& e) {
      spdlog::error("dashboard: {} {}{}: {}", req.method, printable(req.path),
                    about_database(req), printable(e.what()));
      send_error(res, 500, "internal error (see the worker's log)");
    }
  }

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

  // -- reads ----------------------------------------------------------------

  void session(const httplib::Request& req, httplib::Response& res) {
    bool valid = token_matches(policy, req.get_header_value("Authorization"));
    // The names only (the page offers a choice when there are several);
    // never a URL.
    json names = json::array();
    for (auto& db : databases)
      names.push_back(db->name);
    send_json(res, 200,
              json{{"read_only", policy.read_only},
                   {"protect_reads", policy.protect_reads},
                   {"token_configured", !policy.token.empty()},
                   {"actions_enabled", policy.actions_enabled()},
                   {"token_valid", valid},
                   {"charts", dashboard_has_charts()},
                   {"version", node.version},
                   {"worker_id", node.worker_id},
                   {"databases", std::move(names)},
                   {"default_database", defaults::database_name}});
  }

  /// `db`'s sample: its leader's when this node leads it; otherwise one of
  /// the dashboard's own, no older than the sample interval.
  queue_snapshot queue_sample(database_state& db) {
    auto snapshot = metrics->latest_sample(db.name);
    if (snapshot.taken)
      return snapshot;
    std::lock_guard<std::mutex> guard{db.own_sample_mtx};
    auto now = std::chrono::system_clock::now();
    if (!db.own_sample.taken
        || now - *db.own_sample.taken >= cfg.metrics.queue_stats_interval) {
      db.own_sample.queues = with_db(db, [&](pqxx::connection& c) {
        return storage::dashboard_queue_samples(c, cfg.worker.reclaim_window);
      });
      db.own_sample.taken = now;
    }
    return db.own_sample;
  }

  /// The node's throughput ring, of the queues that live in `db` only.
  json throughput_of(const database_state& db) const {
    auto throughput = metrics->throughput_json();
    if (!cfg.sharded())
      return throughput;
    auto& queues = throughput["queues"];
    for (auto it = queues.begin(); it != queues.end();) {
      if (cfg.database_of(it.key()) != db.name)
        it = queues.erase(it);
      else
        ++it;
    }
    return throughput;
  }

  void overview(const httplib::Request& req, httplib::Response& res) {
    auto& db = database_for(req);
    auto snapshot = queue_sample(db);
    auto slots = metrics->slots_by_queue();
    std::map<std::string, json> queues;
    auto row = [](const std::string& name) {
      return json{{"queue", name},          {"available", 0},
                  {"scheduled", 0},         {"running", 0},
                  {"waiting_external", 0},  {"dead_lettered", 0},
                  {"oldest_available_age_seconds", 0},
                  {"unserved", 0},
                  {"paused", false},        {"paused_at", nullptr},
                  {"global_concurrency", nullptr},
                  {"rate_limit", nullptr},  {"here", nullptr}};
    };
    for (auto& q : snapshot.queues) {
      auto r = row(q.queue);
      r["available"] = q.available;
      r["scheduled"] = q.scheduled;
      r["running"] = q.running;
      r["waiting_external"] = q.waiting_external;
      r["dead_lettered"] = q.dead_lettered;
      r["unserved"] = q.unserved;
      r["oldest_available_age_seconds"]
        = q.available > 0 ? q.oldest_available_age_seconds : 0.0;
      queues[q.queue] = std::move(r);
    }
    for (auto& q : db.part.queues) {
      if (queues.count(q.name) == 0)
        queues[q.name] = row(q.name);
      auto s = slots.find(q.name);
      queues[q.name]["here"]
        = json{{"concurrency", q.concurrency},
               {"running", s != slots.end() ? s->second.running : 0}};
    }
    // The database's queue controls, read now (the pause must not wait for
    // the next sample).
    auto controls = with_db(db, [&](pqxx::connection& c) {
      pqxx::read_transaction tx{c, "aw_dashboard_queue_controls"};
      return storage::queue_controls(tx);
    });
    for (auto& [name, c] : controls.items()) {
      if (queues.count(name) == 0)
        queues[name] = row(name);
      for (auto& [key, value] : c.items())
        queues[name][key] = value;
    }
    json list = json::array();
    for (auto& [name, q] : queues)
      list.push_back(std::move(q));
    // Null when this node works with no queue or schedule of `db`.
    auto ready = metrics->ready_of(db.name);
    send_json(
      res, 200,
      json{{"database", db.name},
           {"now", unix_seconds(std::chrono::system_clock::now())},
           {"sample",
            {{"taken_at", snapshot.taken
                            ? json(unix_seconds(*snapshot.taken))
                            : json(nullptr)},
             {"interval_seconds",
              fractional_seconds(cfg.metrics.queue_stats_interval)}}},
           {"queues", std::move(list)},
           {"throughput", throughput_of(db)},
           {"ready", ready ? ready->to_json() : json(nullptr)}});
  }

  void nodes(const httplib::Request& req, httplib::Response& res) {
    auto& db = database_for(req);
    auto slots = metrics->slots_by_queue();
    json queues = json::array();
    for (auto& q : db.part.queues) {
      auto s = slots.find(q.name);
      int running = s != slots.end() ? s->second.running : 0;
      queues.push_back({{"queue", q.name},
                        {"concurrency", q.concurrency},
                        {"running", running},
                        {"free", std::max(0, q.concurrency - running)}});
    }
    auto now = std::chrono::system_clock::now();
    // The node's readiness as /readyz answers it (every database's).
    auto ready = metrics->ready();
    json self{{"worker_id", node.worker_id},
              {"node", cfg.worker.node},
              {"version", node.version},
              {"started_at", unix_seconds(node.started)},
              {"uptime_seconds",
               std::chrono::duration<double>(now - node.started).count()},
              {"ready", ready.ready},
              {"reasons", ready.reasons},
              {"queues", std::move(queues)},
              {"kinds", node.kinds},
              {"this_node", true}};
    // Every process of the cluster, as it registered in this database
    // (worker_nodes).
    auto cluster = with_db(db, [&](pqxx::connection& c) {
      return storage::nodes_json(c, cfg.worker.reclaim_window);
    });
    auto processes = json::parse(cluster);
    json leader = nullptr;
    for (auto& p : processes)
      if (p.value("leader", false))
        leader = p["worker_id"];
    send_json(res, 200,
              json{{"database", db.name},
                   {"nodes", json::array({std::move(self)})},
                   {"cluster", std::move(processes)},
                   {"leader", std::move(leader)},
                   {"note", "Every worker process registers at start and "
                            "refreshes its row with each heartbeat round; "
                            "one not seen for the reclaim window is shown "
                            "dead. The leader (elected through a lease row) "
                            "alone runs the cluster's maintenance: rescues, "
                            "cleanup and queue samples."
                            + std::string{cfg.sharded()
                                            ? " Each database has its own "
                                              "rows and its own leader."
                                            : ""}}});
  }

  void schedules(const httplib::Request& req, httplib::Response& res) {
    auto& db = database_for(req);
    // The schedules whose queue lives in `db` beside its rows
    // (periodic_schedules): that database's leader enqueues their ticks.
    auto rows = with_db(db, [&](pqxx::connection& c) {
      pqxx::read_transaction tx(c);
      return storage::periodic_rows(tx);
    });
    send_json(res, 200,
              json{{"database", db.name},
                   {"schedules",
                    periodic_status(db.part.periodic, rows,
                                    std::chrono::system_clock::now())},
                   {"note", "Each tick of a [periodic.NAME] schedule is "
                            "enqueued once across the cluster, by the node "
                            "that runs maintenance. Times are UTC; a "
                            "schedule's cron fields are read in its time "
                            "zone."}});
  }

  void jobs(const httplib::Request& req, httplib::Response& res) {
    auto& db = database_for(req);
    storage::dashboard_job_filter f;
    f.state = param_text(req, "state");
    if (!f.state.empty()) {
      auto& states = storage::job_states();
      if (std::find(states.begin(), states.end(), f.state) == states.end()) {
        std::string names;
        for (auto& s : states)
          names += (names.empty() ? "" : ", ") + s;
        throw bad_request(400, "state must be one of " + names);
      }
    }
    f.queue = param_text(req, "queue");
    f.kind = param_text(req, "kind");
    auto page_at = page_of(req);
    f.before = page_at.before;
    f.limit = page_at.limit;
    auto page = with_db(db, [&](pqxx::connection& c) {
      return storage::dashboard_jobs(c, f);
    });
    send_json(res, 200, page_json("jobs", page));
  }

  void job(const httplib::Request& req, httplib::Response& res) {
    auto& db = database_for(req);
    auto id = path_id(req);
    auto [row, dead] = with_db(db, [&](pqxx::connection& c) {
      auto r = storage::job_json(c, id);
      std::optional<std::string> d;
      if (!r)
        d = storage::dead_letter_for_job_json(c, id);
      return std::make_pair(r, d);
    });
    if (!row && !dead)
      throw bad_request(404, "no job " + std::to_string(id)
                               + in_database(db));
    send_json(res, 200,
              json{{"job", row ? json::parse(*row) : json(nullptr)},
                   {"dead_letter", dead ? json::parse(*dead) : json(nullptr)}});
  }

  storage::dead_letter_filter dead_letter_filter_of(const httplib::Request& req) {
    storage::dead_letter_filter f;
    f.queue = param_text(req, "queue");
    f.kind = param_text(req, "kind");
    f.fingerprint = param_text(req, "fingerprint");
    return f;
  }

  void dead_letters(const httplib::Request& req, httplib::Response& res) {
    auto& db = database_for(req);
    storage::dashboard_dead_letter_filter f;
    f.match = dead_letter_filter_of(req);
    auto page_at = page_of(req);
    f.before = page_at.before;
    f.limit = page_at.limit;
    auto page = with_db(db, [&](pqxx::connection& c) {
      return storage::dashboard_dead_letters(c, f);
    });
    send_json(res, 200, page_json("dead_letters", page));
  }

  void dead_letter(const httplib::Request& req, httplib::Response& res) {
    auto& db = database_for(req);
    auto id = path_id(req);
    auto row = with_db(db, [&](pqxx::connection& c) {
      return storage::dead_letter_json(c, id);
    });
    if (!row)
      throw bad_request(404, "no dead letter " + std::to_string(id)
                               + in_database(db));
    send_json(res, 200, json{{"dead_letter", json::parse(*row)}});
  }

  void dead_letter_count(const httplib::Request& req, httplib::Response& res) {
    auto& db = database_for(req);
    auto f = dead_letter_filter_of(req);
    auto n = with_db(db, [&](pqxx::connection& c) {
      return storage::count_dead_letters(c, f);
    });
    send_json(res, 200, json{{"count", n}});
  }

  void failures(const httplib::Request& req, httplib::Response& res) {
    auto& db = database_for(req);
    auto limit = param_int(req, "limit", 100, 1, 500);
    auto groups = with_db(db, [&](pqxx::connection& c) {
      return storage::failure_groups_json(c, limit);
    });
    send_json(res, 200, "{\"groups\":" + groups + "}");
  }

  void audit(const httplib::Request& req, httplib::Response& res) {
    auto& db = database_for(req);
    auto at = page_of(req);
    auto page = with_db(db, [&](pqxx::connection& c) {
      return storage::audit_log_page(c, at.before, at.limit);
    });
    send_json(res, 200, page_json("entries", page));
  }

  // -- actions --------------------------------------------------------------

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
    send_json(res, status, body);
  }

  /// The JSON object of an action's body (may be empty: {}).
  static json body_of(const httplib::Request& req) {
    if (req.body.empty())
      return json::object();
    json body;
    try {
      body = json::parse(req.body);
    } catch (const json::exception&) {
      throw bad_request(400, "the body is not valid JSON");
    }
    if (!body.is_object())
      throw bad_request(400, "the body must be a JSON object");
    return body;
  }

  void job_retry(const httplib::Request& req, httplib::Response& res) {
    auto& db = database_for(req);
    auto id = path_id(req);
    body_of(req);
    act(req, res, db, "job.retry", json{{"job_id", id}},
        [&](pqxx::transaction_base& tx, storage::audit_entry& e) {
          auto r = storage::retry_job(tx, id, defaults::notify_channel);
          const auto& was = r.position.state;
          switch (r.result) {
            case storage::retry_result::run_now:
            case storage::retry_result::rerun:
              e.affected = 1;
              e.job_ids = {id};
              e.outcome = "retried (was " + was + ")";
              return std::make_pair(
                200, json{{"id", id}, {"state", "available"}, {"was", was}});
            case storage::retry_result::refused:
              e.outcome = "refused: the job is " + was;
              return std::make_pair(
                409, json{{"error", "job " + std::to_string(id) + " is " + was
                                      + ": it cannot be retried now"},
                          {"state", was}});
            case storage::retry_result::not_found:
            default:
              e.outcome = "not found";
              return std::make_pair(
                404, json{{"error", "no job " + std::to_string(id)
                                      + in_database(db)
                                      + " (a dead-lettered job is retried "
                                        "from its dead letter)"}});
          }
        });
  }

  /// POST /api/queues/pause and /api/queues/resume, body {"queue": "Q"}:
  /// `actor-worker queues pause|resume Q`, audited. A queue the database
  /// does not know (no queue_controls row, no job, no dead letter) and this
  /// node does not serve is refused with 404, nothing changed; one that
  /// lives in another database than the request's, with 400.
  void queue_control(const httplib::Request& req, httplib::Response& res,
                     bool pause) {
    auto& db = database_for(req);
    auto body = body_of(req);
    auto q = body.find("queue");
    if (q == body.end() || !q->is_string() || q->get<std::string>().empty())
      throw bad_request(400, "give the queue: {\"queue\": \"NAME\"}");
    auto queue = q->get<std::string>();
    // A queue's controls live in its database: pausing it in another would
    // stop nothing.
    auto& home = cfg.database_of(queue);
    if (home != db.name)
      throw bad_request(400, "queue '" + queue + "' lives in database '"
                               + home + "', not '" + db.name
                               + "': give database=" + home
                               + " (nothing changed)");
    act(req, res, db, pause ? "queue.pause" : "queue.resume",
        json{{"queue", queue}},
        [&](pqxx::transaction_base& tx, storage::audit_entry& e) {
          bool served = std::any_of(
            db.part.queues.begin(), db.part.queues.end(),
            [&](const queue_config& c) { return c.name == queue; });
          if (!served && !storage::queue_known(tx, queue)) {
            e.outcome = "refused: unknown queue";
            return std::make_pair(
              404, json{{"error", "unknown queue '" + queue
                                    + "': no worker serves it and no job "
                                      "has it (nothing changed)"}});
          }
          if (pause) {
            auto since = storage::pause_queue(tx, queue);
            e.outcome = "paused";
            return std::make_pair(
              200, json{{"queue", queue}, {"paused", true},
                        {"paused_at", since}});
          }
          bool was = storage::resume_queue(tx, queue);
          e.outcome = was ? "resumed" : "was not paused";
          return std::make_pair(
            200, json{{"queue", queue}, {"paused", false}, {"was_paused", was}});
        });
  }

  void queue_pause(const httplib::Request& req, httplib::Response& res) {
    queue_control(req, res, true);
  }

  void queue_resume(const httplib::Request& req, httplib::Response& res) {
    queue_control(req, res, false);
  }

  void job_cancel(const httplib::Request& req, httplib::Response& res) {
    auto& db = database_for(req);
    auto id = path_id(req);
    body_of(req);
    act(req, res, db, "job.cancel", json{{"job_id", id}},
        [&](pqxx::transaction_base& tx, storage::audit_entry& e) {
          auto r = storage::cancel_job(tx, id, defaults::notify_channel,
                                       defaults::cancel_channel);
          const auto& state = r.position.state;
          switch (r.result) {
            case storage::cancel_result::cancelled:
              e.affected = 1;
              e.job_ids = {id};
              e.outcome = "cancelled";
              return std::make_pair(
                200, json{{"id", id}, {"state", "cancelled"}});
            case storage::cancel_result::requested:
              e.affected = 1;
              e.job_ids = {id};
              e.outcome = "cancel requested (running on "
                          + r.position.locked_by + ")";
              return std::make_pair(
                202, json{{"id", id},
                          {"state", state},
                          {"cancel_requested", true},
                          {"locked_by", r.position.locked_by}});
            case storage::cancel_result::finished:
              e.outcome = "refused: the job is " + state;
              return std::make_pair(
                409, json{{"error", "job " + std::to_string(id)
                                      + " already finished (" + state + ")"},
                          {"state", state}});
            case storage::cancel_result::not_found:
            default:
              e.outcome = "not found";
              return std::make_pair(
                404, json{{"error", "no job " + std::to_string(id)
                                      + in_database(db)}});
          }
        });
  }

  void retry_dead_letters(const httplib::Request& req, httplib::Response& res,
                          database_state& db,
                          const storage::dead_letter_filter& f,
                          const json& target) {
    act(req, res, db, "dead_letter.retry", target,
        [&](pqxx::transaction_base& tx, storage::audit_entry& e) {
          auto moved = storage::retry_dead_letters(tx, f);
          e.affected = static_cast<int64_t>(moved.size());
          json jobs = json::array();
          for (auto& m : moved) {
            if (e.job_ids.size() < 1000)
              e.job_ids.push_back(m.job_id);
            if (jobs.size() < 100)
              jobs.push_back({{"dead_letter_id", m.dead_letter_id},
                              {"original_job_id", m.original_job_id},
                              {"job_id", m.job_id}});
          }
          e.outcome = "retried " + std::to_string(moved.size())
                      + " dead letter(s)";
          if (f.id != 0 && moved.empty()) {
            e.outcome = "not found";
            return std::make_pair(
              404, json{{"error", "no dead letter " + std::to_string(f.id)
                                    + in_database(db)}});
          }
          return std::make_pair(
            200, json{{"retried", moved.size()}, {"jobs", std::move(jobs)}});
        });
  }

  void purge_dead_letters(const httplib::Request& req, httplib::Response& res,
                          database_state& db,
                          const storage::dead_letter_filter& f,
                          const json& target) {
    act(req, res, db, "dead_letter.purge", target,
        [&](pqxx::transaction_base& tx, storage::audit_entry& e) {
          auto r = storage::purge_dead_letters(tx, f);
          e.affected = r.purged;
          e.job_ids = r.job_ids;
          e.outcome = "purged " + std::to_string(r.purged)
                      + " dead letter(s)";
          if (f.id != 0 && r.purged == 0) {
            e.outcome = "not found";
            return std::make_pair(
              404, json{{"error", "no dead letter " + std::to_string(f.id)
                                    + in_database(db)}});
          }
          return std::make_pair(200, json{{"purged", r.purged}});
        });
  }

  void dead_letter_retry(const httplib::Request& req, httplib::Response& res) {
    auto& db = database_for(req);
    storage::dead_letter_filter f;
    f.id = path_id(req);
    body_of(req);
    retry_dead_letters(req, res, db, f, json{{"dead_letter_id", f.id}});
  }

  void dead_letter_purge(const httplib::Request& req, httplib::Response& res) {
    auto& db = database_for(req);
    storage::dead_letter_filter f;
    f.id = path_id(req);
    body_of(req);
    purge_dead_letters(req, res, db, f, json{{"dead_letter_id", f.id}});
  }

  /// A bulk action's filter: {"queue", "kind", "fingerprint"} (strings),
  /// or {"all": true} for every dead letter.
  static std::pair<storage::dead_letter_filter, json>
  bulk_filter(const httplib::Request& req) {
    auto body = body_of(req);
    storage::dead_letter_filter f;
    json target = json::object();
    bool all = false;
    for (auto& [key, value] : body.items()) {
      if (key == "all") {
        if (!value.is_boolean())
          throw bad_request(400, "\"all\" must be true or false");
        all = value.get<bool>();
        continue;
      }
      std::string* field = key == "queue"         ? &f.queue
                           : key == "kind"        ? &f.kind
                           : key == "fingerprint" ? &f.fingerprint
                                                  : nullptr;
      if (field == nullptr)
        throw bad_request(400, "unknown key \"" + key
                                 + "\" (allowed: queue, kind, fingerprint, "
                                   "all)");
      if (!value.is_string() || value.get<std::string>().size() > 1000)
        throw bad_request(400, "\"" + key + "\" must be a string");
      *field = value.get<std::string>();
      if (!field->empty())
        target[key] = *field;
    }
    if (target.empty() && !all)
      throw bad_request(400, "give a filter (queue, kind, fingerprint), or "
                             "{\"all\": true} to act on every dead letter");
    if (target.empty())
      target["all"] = true;
    return {f, target};
  }

  void dead_letters_retry(const httplib::Request& req, httplib::Response& res) {
    auto& db = database_for(req);
    auto [f, target] = bulk_filter(req);
    retry_dead_letters(req, res, db, f, target);
  }

  void dead_letters_purge(const httplib::Request& req, httplib::Response& res) {
    auto& db = database_for(req);
    auto [f, target] = bulk_filter(req);
    purge_dead_letters(req, res, db, f, target);
  }
};

dashboard::dashboard(const runtime_config& cfg, dashboard_node node,
                     std::shared_ptr<const prometheus_observer> metrics)
  : impl_(std::make_unique<impl>(cfg, std::move(node), std::move(metrics))) {
}

dashboard::~dashboard() = default;

std::vector<std::string> dashboard::paths() {
  return {"/", "/api/session", "/api/overview", "/api/nodes",
          "/api/schedules", "/api/jobs", "/api/jobs/ID", "/api/dead-letters",
          "/api/dead-letters/ID", "/api/dead-letters/count", "/api/failures",
          "/api/audit", "/api/queues/pause", "/api/queues/resume"};
}

void dashboard::install(httplib::Server& srv) {
  auto* d = impl_.get();
  using member = void (impl::*)(const httplib::Request&, httplib::Response&);
  // Every method of a path reaches the checks, which answer 405 to the
  // wrong one.
  auto route = [&](const char* pattern, dashboard_access access, member fn) {
    httplib::Server::Handler h = [d, access, fn](const httplib::Request& req,
                                                 httplib::Response& res) {
      d->serve(req, res, access,
               [d, fn](const httplib::Request& q, httplib::Response& r) {
                 (d->*fn)(q, r);
               });
    };
    srv.Get(pattern, h);
    srv.Post(pattern, h);
    srv.Put(pattern, h);
    srv.Patch(pattern, h);
    srv.Delete(pattern, h);
  };
  using A = dashboard_access;
  route("/api/session", A::page, &impl::session);
  route("/api/overview", A::read, &impl::overview);
  route("/api/nodes", A::read, &impl::nodes);
  route("/api/schedules", A::read, &impl::schedules);
  route("/api/jobs", A::read, &impl::jobs);
  route(R"(/api/jobs/(\d+))", A::read, &impl::job);
  route(R"(/api/jobs/(\d+)/retry)", A::action, &impl::job_retry);
  route(R"(/api/jobs/(\d+)/cancel)", A::action, &impl::job_cancel);
  route("/api/dead-letters", A::read, &impl::dead_letters);
  route("/api/dead-letters/count", A::read, &impl::dead_letter_count);
  route("/api/dead-letters/retry", A::action, &impl::dead_letters_retry);
  route("/api/dead-letters/purge", A::action, &impl::dead_letters_purge);
  route(R"(/api/dead-letters/(\d+))", A::read, &impl::dead_letter);
  route(R"(/api/dead-letters/(\d+)/retry)", A::action,
        &impl::dead_letter_retry);
  route(R"(/api/dead-letters/(\d+)/purge)", A::action,
        &impl::dead_letter_purge);
  route("/api/failures", A::read, &impl::failures);
  route("/api/queues/pause", A::action, &impl::queue_pause);
  route("/api/queues/resume", A::action, &impl::queue_resume);
  route("/api/audit", A::read, &impl::audit);
  // The page and its files (the page holds no data).
  auto asset = [d](const httplib::Request& req, httplib::Response& res) {
    d->serve(req, res, dashboard_access::page,
             [](const httplib::Request& q, httplib::Response& r) {
               auto path = q.path == "/index.html" ? "/" : q.path;
               auto* a = find_dashboard_asset(path);
               if (a == nullptr)
                 throw bad_request(404, "no such file");
               r.set_content(a->body.data(), a->body.size(), a->content_type);
             });
  };
  for (auto* path : {"/", "/index.html", "/app.js", "/app.css",
                     "/vendor/chart.min.js"})
    srv.Get(path, asset);
  srv.Get("/favicon.ico", [](const httplib::Request&, httplib::Response& res) {
    res.status = 204;
  });
  spdlog::info("http: dashboard at / ({}{}{})",
               d->policy.read_only          ? "read-only"
               : d->policy.actions_enabled() ? "actions need the token"
                                             : "actions off: no token set",
               d->policy.protect_reads ? ", reads need the token" : "",
               dashboard_has_charts() ? "" : ", no charts: Chart.js missing");
}

} // namespace aw
