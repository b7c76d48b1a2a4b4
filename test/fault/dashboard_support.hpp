#pragma once
// Shared by the dashboard's fault tests (dashboard_api_test,
// dashboard_browser_test): HTTP requests to a worker's endpoint, the TOML
// of a worker with the dashboard on, and data put in its database.

#include <map>
#include <string>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "fault_fixture.hpp"

namespace aw::fault::dash {

/// The token the tests configure.
inline const std::string token = "dashboard-test-token-0123456789";

struct answer {
  int status = 0;
  std::string body;
  httplib::Headers headers;

  nlohmann::json json() const {
    return nlohmann::json::parse(body, nullptr, false);
  }
  std::string header(const std::string& name) const {
    auto i = headers.find(name);
    return i == headers.end() ? std::string{} : i->second;
  }
};

/// A request to 127.0.0.1:PORT; status 0 when nothing answers. `headers`
/// may set Host (it replaces the client's).
inline answer request(int port, const std::string& method,
                      const std::string& path,
                      const httplib::Headers& headers = {},
                      const std::string& body = {},
                      const std::string& content_type = {}) {
  httplib::Client client{"127.0.0.1", port};
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(60, 0);
  client.set_write_timeout(10, 0);
  auto send = [&]() -> httplib::Result {
    if (method == "POST")
      return client.Post(path.c_str(), headers, body, content_type.c_str());
    if (method == "PUT")
      return client.Put(path.c_str(), headers, body, content_type.c_str());
    if (method == "DELETE")
      return client.Delete(path.c_str(), headers);
    if (method == "OPTIONS")
      return client.Options(path.c_str(), headers);
    return client.Get(path.c_str(), headers);
  };
  auto res = send();
  if (!res)
    return {};
  return {res->status, res->body, res->headers};
}

inline answer get(int port, const std::string& path,
                  const httplib::Headers& headers = {}) {
  return request(port, "GET", path, headers);
}

/// An action as the page sends it: POST, JSON, the token, this origin.
inline answer act(int port, const std::string& path,
                  const nlohmann::json& body = nlohmann::json::object()) {
  return request(port, "POST", path,
                 {{"Authorization", "Bearer " + token},
                  {"Origin", "http://127.0.0.1:" + std::to_string(port)}},
                 body.dump(), "application/json");
}

/// [http] with the dashboard and a fast queue sample; `more`: extra
/// [http] keys.
inline std::string http_toml(int port, const std::string& more = {}) {
  return "\n[http]\nlisten = \"127.0.0.1:" + std::to_string(port)
         + "\"\n" + more + "\n[metrics]\nqueue_stats_interval = \"200ms\"\n";
}

/// A dead letter written as the worker would, with `message` and `kind`.
inline void add_dead_letter(db_session& db, const std::string& kind,
                            const std::string& queue,
                            const std::string& message,
                            const std::string& args = "{}") {
  db.exec("INSERT INTO dead_letter_jobs (original_job_id, kind, queue, args, "
          "priority, attempt, max_attempts, error_count, last_error_message, "
          "created_at) VALUES (nextval('jobs_id_seq'), " + db.quote(kind)
          + ", " + db.quote(queue) + ", " + db.quote(args)
          + "::jsonb, 0, 3, 3, 3, " + db.quote(message) + ", now())");
}

} // namespace aw::fault::dash
