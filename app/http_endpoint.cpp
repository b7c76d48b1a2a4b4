#include "actor_worker/app/http_endpoint.hpp"

#include <stdexcept>

#include <httplib.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actor_worker/app/prometheus_observer.hpp"

namespace aw {

namespace {

constexpr const char* json_type = "application/json";
constexpr const char* metrics_type = "text/plain; version=0.0.4; charset=utf-8";

} // namespace

http_endpoint::http_endpoint(const http_config& cfg,
                             std::function<bool()> alive,
                             std::shared_ptr<const prometheus_observer> metrics)
  : server_(std::make_unique<httplib::Server>()) {
  auto& srv = *server_;
  srv.new_task_queue = [] { return new httplib::ThreadPool(2); };
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
  srv.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (res.status == 404)
      res.set_content(nlohmann::json{{"error", "no such path"},
                                     {"path", req.path},
                                     {"paths", {"/healthz", "/readyz",
                                                "/metrics"}}}
                        .dump(),
                      json_type);
  });
  auto host = cfg.host();
  auto port = cfg.port();
  if (!srv.bind_to_port(host.c_str(), port))
    throw std::runtime_error("http.listen: cannot listen on " + cfg.listen
                             + " (address in use, or not an address of this "
                               "host)");
  thread_ = std::thread{[this] { server_->listen_after_bind(); }};
  spdlog::info("http: serving /healthz, /readyz and /metrics on {}",
               cfg.listen);
}

http_endpoint::~http_endpoint() {
  server_->stop();
  if (thread_.joinable())
    thread_.join();
}

} // namespace aw
