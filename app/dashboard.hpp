#pragma once
// The web dashboard, served by the node's HTTP endpoint ([http] listen,
// app/http_endpoint.hpp) unless [http] dashboard = false:
//
//   GET  /, /app.js, /app.css, /vendor/chart.min.js   the page (compiled in)
//   GET  /api/session        what the page may do (open, even with
//                            protect_reads: the page learns it needs the
//                            token), and the configured databases:
//                            "databases" (names, "default" first) and
//                            "default_database"
//   GET  /api/overview       the database's queues (a sample: counts by
//                            state, oldest age, from this node's leader
//                            sample or, when it does not lead there, one
//                            of the dashboard's own; its queue controls;
//                            this node's slots), this node's throughput of
//                            those queues (in-memory ring), and the
//                            database's readiness on this node (null when
//                            no queue or schedule of the node lives there)
//   GET  /api/nodes          this node (worker id, its queues of the
//                            database with concurrency and running, kinds,
//                            the node's readiness as /readyz) and
//                            every process registered in the database
//                            (worker_nodes)
//   GET  /api/schedules      the periodic schedules ([periodic.NAME]) whose
//                            queue lives in the database, with their last
//                            and next tick (app/periodic_status.hpp)
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
//   POST /api/queues/pause, /api/queues/resume  {"queue": "Q"} (Q must
//                            live in the database)
//
// Every route but /api/session takes `database=NAME` in its query string
// (actions too: their JSON bodies stay as they are): "default" is
// [database], another name a [databases.NAME]; absent or empty, the
// default one. An unknown name is refused with 400, listing the
// configured names (never a URL). The route reads and writes that
// database only; an action's audit row goes to the database it acted on.
//
// Every request passes the checks of app/dashboard_security.hpp first;
// every action writes its audit_log row in its own transaction. The data
// comes through storage/dashboard_queries.hpp and the admin CLI's storage
// code on a few connections per database (app/dashboard_pool.hpp), opened on
// first use: an unreachable database answers 503 for the requests that
// name it, and the others go on.

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
  /// The worker id ("node:pid:random").
  std::string worker_id;
  /// The binary's version.
  std::string version;
  /// The job kinds this node runs.
  std::vector<std::string> kinds;
  /// When the node started.
  std::chrono::system_clock::time_point started;
};

/// The web dashboard's pages and JSON API (see the file's comment), served by aw::http_endpoint.
class dashboard {
public:
  /// `cfg`: the node's configuration (databases, queues, [http]); throws
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
