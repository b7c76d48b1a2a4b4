#pragma once
// The node's HTTP endpoint ([http] listen), on cpp-httplib:
//
//   GET /healthz   200 {"status":"ok"} while the node's actors run; 503
//                  {"status":"stopped"} once the node ended.
//   GET /readyz    200 {"ready":true,"reasons":[]} when the database is
//                  reachable, the schema compatible and the node not
//                  draining; otherwise 503 with the reasons.
//   GET /metrics   every metric in the Prometheus text format.
//   /, /api/...    the dashboard, when given one (app/dashboard.hpp).
//
// Probes are not logged (a kubelet asks every few seconds). Each
// connection is served on a thread of its own (up to 1024 at once), and a
// connection silent for 2 s is closed: slow or idle clients, or a slow
// page, do not hold up a probe. Nothing but the dashboard touches the
// database.

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "actor_worker/config/config.hpp"

namespace httplib {
class Server;
}

namespace aw {

class prometheus_observer;
class dashboard;

/// The node's HTTP endpoint ([http] listen): /healthz, /readyz, /metrics and the dashboard, on cpp-httplib threads of its own.
class http_endpoint {
public:
  /// Binds `cfg.listen` and starts serving. `alive` answers /healthz;
  /// `metrics` answers /readyz and /metrics; `dash` (may be null) serves
  /// the dashboard. Throws std::runtime_error naming the address when it
  /// cannot bind (in use, not a local address).
  http_endpoint(const http_config& cfg, std::function<bool()> alive,
                std::shared_ptr<const prometheus_observer> metrics,
                std::shared_ptr<dashboard> dash = nullptr);

  /// Stops serving and joins its threads.
  ~http_endpoint();

  http_endpoint(const http_endpoint&) = delete;
  http_endpoint& operator=(const http_endpoint&) = delete;

private:
  std::shared_ptr<dashboard> dashboard_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
};

} // namespace aw
