#include "actor_worker/app/http_endpoint.hpp"

#include <stdexcept>

#include <sys/socket.h>

#include <httplib.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actor_worker/app/dashboard.hpp"
#include "actor_worker/app/dashboard_security.hpp"
#include "actor_worker/app/prometheus_observer.hpp"

namespace aw {

namespace {

constexpr const char* json_type = "application/json";
constexpr const char* metrics_type = "text/plain; version=0.0.4; charset=utf-8";

} // namespace

http_endpoint::http_endpoint(const http_config& cfg,
                             std::function<bool()> alive,
                             std::shared_ptr<const prometheus_observer> metrics,
                             std::shared_ptr<dashboard> dash)
  : dashboard_(std::move(dash)), server_(std::make_unique<httplib::Server>()) {
  auto& srv = *server_;
  size_t threads = dashboard_ ? 4 : 2;
  srv.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  // Nothing here takes a large body: an action's filter is a few bytes.
  srv.set_payload_max_length(64 * 1024);
  srv.Get("/healthz", [alive](const httplib::Request&, httplib::Response& res) {
    bool up = alive();
    res.status = up ? 200 : 503;
    res.set_content(nlohmann::json{{"status", up ? "ok" : "stopped"}}.dump(),
                    json_type);
  });
  srv.Get("/readyz", [alive, metrics](const httplib::Request&,
                                      httplib::Response& res) {
    auto r = metrics->ready();
    if (!alive()) {
      r.ready = false;
      r.reasons.insert(r.reasons.begin(), "the node stopped");
    }
    res.status = r.ready ? 200 : 503;
    res.set_content(r.to_json().dump(), json_type);
  });
  srv.Get("/metrics", [metrics](const httplib::Request&,
                                httplib::Response& res) {
    res.set_content(metrics->scrape(), metrics_type);
  });
  std::vector<std::string> paths{"/healthz", "/readyz", "/metrics"};
  if (dashboard_) {
    dashboard_->install(srv);
    for (auto& p : dashboard::paths())
      paths.push_back(p);
  }
  srv.set_error_handler([paths](const httplib::Request& req,
                                httplib::Response& res) {
    // A handler's own answer (the dashboard's JSON errors) stands.
    if (res.status == 404 && res.body.empty())
      res.set_content(nlohmann::json{{"error", "no such path"},
                                     {"path", req.path},
                                     {"paths", paths}}
                        .dump(),
                      json_type);
    // Every error answer carries the dashboard's security headers, the
    // generic one as well as the dashboard's own.
    for (auto& [name, value] : security_headers())
      if (!res.has_header(name.c_str()))
        res.set_header(name.c_str(), value);
  });
  // cpp-httplib sets SO_REUSEPORT by default: a second node on the same
  // address then binds too, and the kernel deals connections between the
  // two (/metrics alternating between nodes). SO_REUSEADDR only: a
  // restart still binds at once, a second listener fails.
  srv.set_socket_options([](int sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  auto host = cfg.host();
  auto port = cfg.port();
  if (!srv.bind_to_port(host.c_str(), port))
    throw config_error("http.listen: cannot listen on " + cfg.listen
                       + ": the address is in use (another process, or "
                         "another node of this host, listens there: the "
                         "nodes of a cluster file share [http] listen, so "
                         "each needs a host of its own) or not an address "
                         "of this host");
  thread_ = std::thread{[this] { server_->listen_after_bind(); }};
  spdlog::info("http: serving /healthz, /readyz and /metrics{} on {}",
               dashboard_ ? " and the dashboard" : "", cfg.listen);
}

http_endpoint::~http_endpoint() {
  server_->stop();
  if (thread_.joinable())
    thread_.join();
}

} // namespace aw
