#include "actor_worker/app/http_endpoint.hpp"

#include <cstdlib>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include <dirent.h>
#include <netinet/in.h>

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

/// Connections served at once, each on a thread of its own; more wait for
/// one to end. cpp-httplib holds a thread for as long as a client sends a
/// header line now and then, or sends nothing until the read timeout: with
/// a fixed pool of 2 or 4, four slow clients (or 200 idle ones) starved
/// /healthz. A thread that waits costs a stack's address space and a few
/// pages, so the cap is high enough for 500 such clients and a probe.
constexpr size_t max_connections = 1024;

/// How long a connection may stay silent (a request's next bytes, the
/// next request of a keep-alive connection) before it is closed.
constexpr time_t idle_seconds = 2;

/// cpp-httplib's task queue: each accepted connection runs on a thread of
/// its own, up to max_connections at once.
class connection_threads : public httplib::TaskQueue {
public:
  explicit connection_threads(int port) : port_(port) {
  }

  void enqueue(std::function<void()> fn) override {
    std::lock_guard<std::mutex> guard{mtx_};
    reap_finished();
    if (threads_.size() >= max_connections) {
      waiting_.push_back(std::move(fn));
      return;
    }
    start(std::move(fn));
  }

  /// After the listening socket closed: connections still open are shut
  /// down (a client sending a header line every second would otherwise
  /// hold its thread, and the node's stop, for as long as it likes), then
  /// every thread is joined.
  void shutdown() override {
    shut_down_connections();
    std::vector<std::unique_ptr<runner>> all;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      all.swap(threads_);
    }
    for (auto& r : all)
      r->thread.join();
  }

private:
  struct runner {
    std::thread thread;
    bool done = false;
  };

  void start(std::function<void()> fn) {
    auto r = std::make_unique<runner>();
    auto* self = r.get();
    r->thread = std::thread{[this, self, fn = std::move(fn)]() mutable {
      for (;;) {
        fn();
        std::lock_guard<std::mutex> guard{mtx_};
        if (waiting_.empty()) {
          self->done = true;
          return;
        }
        fn = std::move(waiting_.front());
        waiting_.pop_front();
      }
    }};
    threads_.push_back(std::move(r));
  }

  /// Joins the threads whose connection ended (under mtx_).
  void reap_finished() {
    for (auto it = threads_.begin(); it != threads_.end();) {
      if ((*it)->done) {
        (*it)->thread.join();
        it = threads_.erase(it);
      } else {
        ++it;
      }
    }
  }

  /// shutdown(2) on every connected TCP socket of this process whose local
  /// port is the endpoint's: the connections it accepted. Their threads'
  /// reads return at once.
  void shut_down_connections() const {
    if (auto* dir = ::opendir("/proc/self/fd")) {
      while (auto* e = ::readdir(dir)) {
        int fd = std::atoi(e->d_name);
        if (fd <= 2 || fd == ::dirfd(dir))
          continue;
        sockaddr_storage local{}, peer{};
        socklen_t len = sizeof local, peer_len = sizeof peer;
        if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0
            || ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0)
          continue;
        int port = -1;
        if (local.ss_family == AF_INET)
          port = ntohs(reinterpret_cast<sockaddr_in*>(&local)->sin_port);
        else if (local.ss_family == AF_INET6)
          port = ntohs(reinterpret_cast<sockaddr_in6*>(&local)->sin6_port);
        if (port == port_)
          ::shutdown(fd, SHUT_RDWR);
      }
      ::closedir(dir);
    }
  }

  int port_;
  std::mutex mtx_;
  std::vector<std::unique_ptr<runner>> threads_;
  std::deque<std::function<void()>> waiting_;
};

} // namespace

http_endpoint::http_endpoint(const http_config& cfg,
                             std::function<bool()> alive,
                             std::shared_ptr<const prometheus_observer> metrics,
                             std::shared_ptr<dashboard> dash)
  : dashboard_(std::move(dash)), server_(std::make_unique<httplib::Server>()) {
  auto& srv = *server_;
  auto port = cfg.port();
  srv.new_task_queue = [port] { return new connection_threads(port); };
  // A silent connection is closed soon: its thread is not held long.
  srv.set_read_timeout(idle_seconds, 0);
  srv.set_keep_alive_timeout(idle_seconds);
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
  auto listening = std::make_shared<int>(-1);
  srv.set_socket_options([listening](int sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    *listening = sock;
  });
  auto host = cfg.host();
  if (!srv.bind_to_port(host.c_str(), port))
    throw config_error("http.listen: cannot listen on " + cfg.listen
                       + ": the address is in use (another process, or "
                         "another node of this host, listens there: the "
                         "nodes of a cluster file share [http] listen, so "
                         "each needs a host of its own) or not an address "
                         "of this host");
  // Debian's cpp-httplib listens with a backlog of 5: a burst of clients
  // (or a loaded host slow to accept) overflows it, and a probe's SYN is
  // dropped and retried a second later. listen() again sets a real one.
  if (*listening >= 0)
    ::listen(*listening, SOMAXCONN);
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
