#include "actor_worker/app/dashboard.hpp"

#include <algorithm>
#include <limits>

#include "actor_worker/app/dashboard_assets.hpp"
#include "actor_worker/app/internal/dashboard_impl.hpp"
#include "actor_worker/app/utf8.hpp"

namespace aw {

namespace dashboard_internal {

constexpr const char* json_type = "application/json";

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

} // namespace dashboard_internal

using namespace dashboard_internal;

// -- the request --------------------------------------------------------------

dashboard::impl::database_state&
dashboard::impl::database_for(const httplib::Request& req) {
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

std::string dashboard::impl::about_database(const httplib::Request& req) const {
  if (!cfg.sharded())
    return {};
  auto name = req.has_param("database") ? req.get_param_value("database")
                                        : std::string{};
  return " (database '"
         + printable(name.empty() ? std::string{defaults::database_name}
                                  : name)
         + "')";
}

std::string dashboard::impl::in_database(const database_state& db) const {
  return cfg.sharded() ? " in database '" + db.name + "'" : std::string{};
}

void dashboard::impl::serve(const httplib::Request& req, httplib::Response& res,
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

// -- the routes ---------------------------------------------------------------

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
