#pragma once
// The web dashboard, served by the node's HTTP endpoint ([http] listen,
// app/http_endpoint.hpp) unless [http] dashboard = false:
//
//   GET  /, /app.js, /app.css, /vendor/chart.min.js   the page (compiled in)
//   GET  /api/session        what the page may do (open, even with
//                            protect_reads: the page learns it needs the
//                            token)
//   GET  /api/overview       queues (the engine's latest sample: counts by
//                            state, oldest age, paused), throughput of
//                            this node (in-memory ring), readiness
//   GET  /api/nodes          this node (worker id, queues, concurrency,
//                            running, kinds) and every registered process
//                            of the cluster (worker_nodes)
//   GET  /api/schedules      the periodic schedules ([periodic.NAME]) with
//                            their last and next tick
//                            (app/periodic_status.hpp)
//   GET  /api/jobs?state=&queue=&kind=&before=&limit=   a keyset page
//   GET  /api/jobs/ID        one job (and its dead letter, if any)
//   GET  /api/dead-letters?queue=&kind=&fingerprint=&before=&limit=
//   GET  /api/dead-letters/ID
//   GET  /api/dead-letters/count?queue=&kind=&fingerprint=  (before a bulk
//                            action)
//   GET  /api/failures       dead letters grouped by kind and fingerprint
//   GET  /api/audit?before=  the audit log
//   POST /api/jobs/ID/retry, /api/jobs/ID/cancel
//   POST /api/dead-letters/ID/retry, /api/dead-letters/ID/purge
//   POST /api/dead-letters/retry, /api/dead-letters/purge  with a JSON
//                            filter {"queue", "kind", "fingerprint"} or
//                            {"all": true}
//
// Every request passes the checks of app/dashboard_security.hpp first;
// every action writes its audit_log row in its own transaction. The data
// comes through storage/dashboard.hpp and the admin CLI's storage code on
// a few connections of its own, opened on first use.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "actor_worker/config/config.hpp"

namespace httplib {
class Server;
}

namespace aw {

class prometheus_observer;

/// What the dashboard shows of the node serving it.
struct dashboard_node {
  std::string worker_id;
  std::string version;
  std::vector<std::string> kinds;
  std::chrono::system_clock::time_point started;
};

class dashboard {
public:
  /// `cfg`: the node's configuration (database, queues, [http]); throws
  /// config_error when [http] token_env names a variable that is unset.
  dashboard(const runtime_config& cfg, dashboard_node node,
            std::shared_ptr<const prometheus_observer> metrics);
  ~dashboard();

  dashboard(const dashboard&) = delete;
  dashboard& operator=(const dashboard&) = delete;

  /// Adds the routes above to `srv` (before it listens).
  void install(httplib::Server& srv);

  /// The paths /healthz, /readyz and /metrics do not cover, for the 404
  /// answer's list.
  static std::vector<std::string> paths();

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace aw
