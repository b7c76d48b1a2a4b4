#pragma once
// A real HTTP server on 127.0.0.1 and a free port (cpp-httplib, in the
// test process) for the HTTP kinds' tests, answering each path as they
// need:
//   /ok 200 empty    /text 200 text    /outcome 200 {"outcome": "snooze", "for": "3s"}
//   /bad-outcome 200 {"outcome": "later"}
//   /429 Retry-After: 7    /429-date Retry-After: an HTTP date 120 s ahead
//   /429-century Retry-After: 100 years
//   /503 without, /503-after with Retry-After: 90
//   /404, /500, /302, /slow (200 after 3 s)
//   /echo-auth 401 quoting the Authorization header in its body
//   /echo-auth-at-cut?before=N[&prefix=P] the same where the error
//     excerpt's cut (byte 512) falls N bytes before the header's end
//   /record 204, remembering Content-Type, Authorization and the body
// Its listen backlog is 5 (compiled into Debian's library): not for
// hundreds of connections at once.

#include <chrono>
#include <ctime>
#include <functional>
#include <stdexcept>
#include <mutex>
#include <string>
#include <thread>

#include <httplib.h>

namespace aw::test {

using namespace std::chrono_literals;

/// An HTTP server on 127.0.0.1 and a free port, answering as each test
/// needs; it records what it received.
class http_test_server {
public:
  http_test_server() {
    svr_.new_task_queue = [] { return new httplib::ThreadPool(32); };
    svr_.Post("/ok", [](const auto&, auto& res) { res.status = 200; });
    svr_.Post("/text", [](const auto&, auto& res) {
      res.set_content("thanks", "text/plain");
    });
    svr_.Post("/outcome", [](const auto&, auto& res) {
      res.set_content(R"({"outcome": "snooze", "for": "3s"})",
                      "application/json");
    });
    svr_.Post("/bad-outcome", [](const auto&, auto& res) {
      res.set_content(R"({"outcome": "later"})", "application/json");
    });
    svr_.Post("/429", [](const auto&, auto& res) {
      res.status = 429;
      res.set_header("Retry-After", "7");
      res.set_content("slow down", "text/plain");
    });
    svr_.Post("/429-date", [](const auto&, auto& res) {
      res.status = 429;
      char date[64];
      auto at = std::time(nullptr) + 120;
      std::tm tm{};
      ::gmtime_r(&at, &tm);
      std::strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
      res.set_header("Retry-After", date);
    });
    svr_.Post("/429-century", [](const auto&, auto& res) {
      res.status = 429;
      res.set_header("Retry-After", "3153600000"); // 100 years
    });
    svr_.Post("/503", [](const auto&, auto& res) { res.status = 503; });
    svr_.Post("/503-after", [](const auto&, auto& res) {
      res.status = 503;
      res.set_header("Retry-After", "90");
    });
    svr_.Post("/404", [](const auto&, auto& res) {
      res.status = 404;
      res.set_content("no such endpoint", "text/plain");
    });
    svr_.Post("/500", [](const auto&, auto& res) {
      res.status = 500;
      res.set_content("internal error", "text/plain");
    });
    svr_.Post("/302", [](const auto&, auto& res) {
      res.status = 302;
      res.set_header("Location", "/ok");
    });
    svr_.Post("/slow", [](const auto&, auto& res) {
      std::this_thread::sleep_for(3s);
      res.status = 200;
    });
    svr_.Post("/echo-auth", [](const auto& req, auto& res) {
      res.status = 401;
      res.set_content("invalid credentials: "
                        + req.get_header_value("Authorization"),
                      "text/plain");
    });
    svr_.Post("/echo-auth-at-cut", [](const auto& req, auto& res) {
      // The Authorization header (or its first `prefix` bytes, then other
      // text) placed so that byte 512 falls `before` bytes before its end.
      auto auth = req.get_header_value("Authorization");
      auto before = std::stoul(req.get_param_value("before"));
      auto shown = req.has_param("prefix")
                     ? auth.substr(0, std::stoul(req.get_param_value("prefix")))
                         + "-and-then-something-else"
                     : auth;
      res.status = 401;
      res.set_content(std::string(512 - (auth.size() - before), 'x') + shown
                        + " and more text after it",
                      "text/plain");
    });
    svr_.Post("/record", [this](const auto& req, auto& res) {
      std::lock_guard<std::mutex> guard{mtx_};
      content_type_ = req.get_header_value("Content-Type");
      authorization_ = req.get_header_value("Authorization");
      body_ = req.body;
      res.status = 204;
    });
    svr_.Post("/hand", [this](const auto& req, auto& res) {
      std::function<std::string(const std::string&, const std::string&)> fn;
      {
        std::lock_guard<std::mutex> guard{mtx_};
        fn = on_hand_;
      }
      if (!fn) {
        res.status = 500;
        return;
      }
      res.set_content(fn(req.get_header_value("X-AW-Callback-Id"), req.body),
                      "application/json");
    });
    port_ = svr_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread{[this] { svr_.listen_after_bind(); }};
    for (int i = 0; i < 250 && !svr_.is_running(); ++i)
      std::this_thread::sleep_for(20ms);
  }

  ~http_test_server() {
    svr_.stop();
    thread_.join();
  }

  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }

  std::string content_type() {
    std::lock_guard<std::mutex> guard{mtx_};
    return content_type_;
  }
  std::string authorization() {
    std::lock_guard<std::mutex> guard{mtx_};
    return authorization_;
  }
  std::string body() {
    std::lock_guard<std::mutex> guard{mtx_};
    return body_;
  }

  /// Answers POST `path` (only "/hand") with what `fn(X-AW-Callback-Id,
  /// body)` returns, as JSON.
  void on_post(const std::string& path,
               std::function<std::string(const std::string&, const std::string&)> fn) {
    if (path != "/hand")
      throw std::invalid_argument("http_test_server: only /hand takes a function");
    std::lock_guard<std::mutex> guard{mtx_};
    on_hand_ = std::move(fn);
  }

private:
  httplib::Server svr_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mtx_;
  std::string content_type_;
  std::string authorization_;
  std::string body_;
  std::function<std::string(const std::string&, const std::string&)> on_hand_;
};

} // namespace aw::test
