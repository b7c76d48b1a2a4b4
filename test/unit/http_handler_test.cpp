// HTTP kinds ([kinds.NAME] http = {...}) against a real HTTP server on a
// loopback port (cpp-httplib, in this process), through the registry,
// without a database: status codes, Retry-After, the body outcome
// protocol, timeouts, refused connections, cancellation, `${ENV}` header
// values and their redaction, and many requests in flight on one thread.

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <csignal>
#include <condition_variable>
#include <cstdlib>
#include <ctime>
#include <dirent.h>
#include <mutex>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "actor_worker/app/http_handler.hpp"
#include "actor_worker/app/registry.hpp"
#include "actor_worker/app/toml_kinds.hpp"
#include "support/http_test_server.hpp"

namespace aw {
std::ostream& operator<<(std::ostream& out, outcome_kind k);
} // namespace aw

using namespace std::chrono_literals;

namespace {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

/// A registry with one HTTP kind "job" configured from TOML, as the binary
/// reads it.
std::shared_ptr<aw::registry> registry_for(const std::string& url,
                                           const std::string& extra = "") {
  auto cfg = aw::parse_config("[kinds.job]\nhttp = { url = \"" + url + "\""
                                + extra + " }\n",
                              "test.toml");
  auto reg = std::make_shared<aw::registry>();
  aw::register_toml_kinds(*reg, cfg.kinds);
  return reg;
}

aw::claimed_job make_job() {
  aw::claimed_job job;
  job.id = 7;
  job.kind = "job";
  job.queue = "default";
  job.args = R"({"user": 12})";
  job.attempt = 1;
  job.metadata = "{}";
  return job;
}

aw::job_outcome post(const std::string& url, const std::string& extra = "",
                     const aw::cancellation_token& cancel = {}) {
  return registry_for(url, extra)->run(make_job(), cancel);
}

/// A loopback port nothing listens on.
int closed_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

int threads_of_this_process() {
  int n = 0;
  if (auto dir = ::opendir("/proc/self/task")) {
    while (auto e = ::readdir(dir))
      n += e->d_name[0] != '.';
    ::closedir(dir);
  }
  return n;
}

} // namespace

BOOST_AUTO_TEST_SUITE(http_handler_test)

BOOST_AUTO_TEST_CASE(a_2xx_completes_and_the_job_is_posted_as_json) {
  aw::test::http_test_server server;
  ::setenv("AW_TEST_HTTP_TOKEN", "tok-123456789", 1);
  auto out = post(server.url("/record"),
                  ", headers = { Authorization = \"Bearer "
                  "${AW_TEST_HTTP_TOKEN}\" }");
  ::unsetenv("AW_TEST_HTTP_TOKEN");
  BOOST_TEST(out.kind == aw::outcome_kind::completed, out.message);
  BOOST_TEST(server.content_type() == "application/json");
  BOOST_TEST(server.authorization() == "Bearer tok-123456789");
  auto doc = nlohmann::json::parse(server.body());
  BOOST_TEST(doc.at("id") == 7);
  BOOST_TEST(doc.at("kind") == "job");
  BOOST_TEST(doc.at("args").at("user") == 12);
  BOOST_TEST(doc.at("attempt") == 1);
  BOOST_TEST(post(server.url("/ok")).kind == aw::outcome_kind::completed);
  BOOST_TEST(post(server.url("/text")).kind == aw::outcome_kind::completed);
}

BOOST_AUTO_TEST_CASE(a_2xx_body_may_return_an_outcome) {
  aw::test::http_test_server server;
  auto out = post(server.url("/outcome"));
  BOOST_TEST(out.kind == aw::outcome_kind::snoozed);
  BOOST_TEST(out.delay_ms == 3000);
  auto bad = post(server.url("/bad-outcome"));
  BOOST_TEST(bad.kind == aw::outcome_kind::terminal_failure);
  BOOST_TEST(contains(bad.message, "unknown outcome \"later\""), bad.message);
}

BOOST_AUTO_TEST_CASE(status_429_and_503_retry_after_retry_after) {
  aw::test::http_test_server server;
  auto seconds = post(server.url("/429"));
  BOOST_TEST(seconds.kind == aw::outcome_kind::retry_after);
  BOOST_TEST(seconds.delay_ms == 7000);
  BOOST_TEST(contains(seconds.message, "HTTP 429 from " + server.url("/429")
                                         + ": slow down (Retry-After: 7s)"),
             seconds.message);
  auto date = post(server.url("/429-date"));
  BOOST_TEST(date.kind == aw::outcome_kind::retry_after);
  BOOST_TEST((date.delay_ms >= 117000 && date.delay_ms <= 121000),
             date.delay_ms);
  auto after = post(server.url("/503-after"));
  BOOST_TEST(after.kind == aw::outcome_kind::retry_after);
  BOOST_TEST(after.delay_ms == 90000);
  // Without Retry-After: the usual backoff.
  auto plain = post(server.url("/503"));
  BOOST_TEST(plain.kind == aw::outcome_kind::retryable_failure);
  BOOST_TEST(plain.message == "HTTP 503 from " + server.url("/503"));
}

BOOST_AUTO_TEST_CASE(a_huge_retry_after_is_capped_at_max_retry_after) {
  aw::test::http_test_server server;
  // By default at one day.
  auto capped = post(server.url("/429-century"));
  BOOST_TEST(capped.kind == aw::outcome_kind::retry_after);
  BOOST_TEST(capped.delay_ms == 24 * 3600 * 1000);
  BOOST_TEST(contains(capped.message, "capped at max_retry_after 24h"),
             capped.message);
  // The kind's own cap, which a smaller Retry-After does not reach.
  auto own = post(server.url("/429-century"), ", max_retry_after = \"5m\"");
  BOOST_TEST(own.delay_ms == 5 * 60 * 1000);
  auto under = post(server.url("/429"), ", max_retry_after = \"5m\"");
  BOOST_TEST(under.delay_ms == 7000);
  BOOST_TEST(!contains(under.message, "capped"), under.message);
  // It must be positive.
  BOOST_CHECK_THROW(registry_for(server.url("/429"), ", max_retry_after = \"0\""),
                    aw::config_error);
}

BOOST_AUTO_TEST_CASE(other_4xx_dead_letter_and_5xx_retry) {
  aw::test::http_test_server server;
  auto missing = post(server.url("/404"));
  BOOST_TEST(missing.kind == aw::outcome_kind::terminal_failure);
  BOOST_TEST(missing.message
             == "HTTP 404 from " + server.url("/404") + ": no such endpoint");
  auto error = post(server.url("/500"));
  BOOST_TEST(error.kind == aw::outcome_kind::retryable_failure);
  BOOST_TEST(contains(error.message, "HTTP 500"));
  auto redirect = post(server.url("/302"));
  BOOST_TEST(redirect.kind == aw::outcome_kind::terminal_failure);
  BOOST_TEST(contains(redirect.message, "redirects are not followed"));
}

BOOST_AUTO_TEST_CASE(a_timeout_is_retried) {
  aw::test::http_test_server server;
  auto start = std::chrono::steady_clock::now();
  auto out = post(server.url("/slow"), ", timeout = \"300ms\"");
  auto took = std::chrono::steady_clock::now() - start;
  BOOST_TEST(out.kind == aw::outcome_kind::retryable_failure);
  BOOST_TEST(out.message == "the HTTP request to " + server.url("/slow")
                              + " timed out after 300ms");
  BOOST_TEST((took < 2s));
}

BOOST_AUTO_TEST_CASE(a_refused_connection_is_retried) {
  auto url = "http://127.0.0.1:" + std::to_string(closed_port()) + "/x";
  auto out = post(url);
  BOOST_TEST(out.kind == aw::outcome_kind::retryable_failure);
  BOOST_TEST(contains(out.message, "the HTTP request to " + url + " failed: "),
             out.message);
}

BOOST_AUTO_TEST_CASE(cancellation_aborts_the_request) {
  aw::test::http_test_server server;
  aw::cancellation_token cancel;
  std::thread canceller{[&] {
    std::this_thread::sleep_for(200ms);
    cancel.cancel("the job's lease was lost");
  }};
  auto start = std::chrono::steady_clock::now();
  auto out = post(server.url("/slow"), "", cancel);
  auto took = std::chrono::steady_clock::now() - start;
  canceller.join();
  BOOST_TEST(out.kind == aw::outcome_kind::retryable_failure);
  BOOST_TEST(out.message == "cancelled (the job's lease was lost): the HTTP "
                            "request to " + server.url("/slow")
                              + " was aborted");
  BOOST_TEST((took < 2s));
}

BOOST_AUTO_TEST_CASE(header_values_and_url_secrets_never_reach_a_message) {
  aw::test::http_test_server server;
  ::setenv("AW_TEST_HTTP_SECRET", "Bearer zz-very-secret-token", 1);
  // The server echoes the header into its error body.
  auto out = post(server.url("/echo-auth"),
                  ", headers = { Authorization = \"${AW_TEST_HTTP_SECRET}\" }");
  ::unsetenv("AW_TEST_HTTP_SECRET");
  BOOST_TEST(out.kind == aw::outcome_kind::terminal_failure);
  BOOST_TEST(!contains(out.message, "zz-very-secret-token"), out.message);
  BOOST_TEST(contains(out.message, "invalid credentials: [redacted]"),
             out.message);
  // User info and query of the URL are not quoted either.
  auto url = server.url("/404");
  url.insert(7, "user:pa55word@");
  auto quoted = post(url + "?api_key=k3y");
  BOOST_TEST(quoted.kind == aw::outcome_kind::terminal_failure);
  BOOST_TEST(contains(quoted.message, "HTTP 404 from " + server.url("/404")),
             quoted.message);
  BOOST_TEST(!contains(quoted.message, "pa55word"));
  BOOST_TEST(!contains(quoted.message, "k3y"));
}

BOOST_AUTO_TEST_CASE(a_secret_the_error_excerpt_cuts_is_masked_whole) {
  aw::test::http_test_server server;
  const std::string token = "HeaderSecretABC123";
  ::setenv("AW_TEST_HTTP_SECRET", ("Bearer " + token).c_str(), 1);
  const std::string headers
    = ", headers = { Authorization = \"${AW_TEST_HTTP_SECRET}\" }";
  // The cut 1, 5 and 12 bytes before the end of "Bearer HeaderSecretABC123",
  // and a body that quotes only its first 22 bytes (the cut leaves 11 of
  // the token once "Bearer" is masked).
  for (const auto* path : {"/echo-auth-at-cut?before=1", "/echo-auth-at-cut?before=5",
                           "/echo-auth-at-cut?before=12",
                           "/echo-auth-at-cut?before=3&prefix=22"})
    BOOST_TEST_CONTEXT(path) {
      auto out = post(server.url(path), headers);
      BOOST_TEST(out.kind == aw::outcome_kind::terminal_failure);
      BOOST_TEST(!contains(out.message, "HeaderSec"), out.message);
      BOOST_TEST(!contains(out.message, "ABC12"), out.message);
      BOOST_TEST(contains(out.message, "[redacted]"), out.message);
      BOOST_TEST(contains(out.message, "HTTP 401 from "), out.message);
    }
  ::unsetenv("AW_TEST_HTTP_SECRET");
}

BOOST_AUTO_TEST_CASE(redacted_url_drops_user_info_query_and_fragment) {
  BOOST_TEST(aw::redacted_url("https://u:p@h.example:8443/a/b?x=1#f")
             == "https://h.example:8443/a/b");
  BOOST_TEST(aw::redacted_url("http://h") == "http://h");
  BOOST_TEST(aw::redacted_url("http://h?q") == "http://h");
}

/// A server in a child process that answers every request after a second
/// (thread per connection, Connection: close), so its threads do not count
/// as this process's. Not cpp-httplib: its listen backlog of 5 drops
/// connections when 200 arrive at once. Forked while this process runs no
/// other thread.
class slow_forked_server {
public:
  slow_forked_server() {
    int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    BOOST_REQUIRE(::bind(lfd, reinterpret_cast<sockaddr*>(&addr),
                         sizeof(addr)) == 0);
    BOOST_REQUIRE(::listen(lfd, 1024) == 0);
    socklen_t len = sizeof(addr);
    ::getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    pid_ = ::fork();
    BOOST_REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      for (;;) {
        int c = ::accept(lfd, nullptr, nullptr);
        if (c < 0)
          continue;
        std::thread{[c] {
          std::string req;
          char buf[4096];
          size_t need = std::string::npos;
          while (req.size() < need) {
            auto n = ::read(c, buf, sizeof(buf));
            if (n <= 0)
              break;
            req.append(buf, static_cast<size_t>(n));
            auto end = req.find("\r\n\r\n");
            if (end != std::string::npos && need == std::string::npos) {
              auto cl = req.find("Content-Length: ");
              need = end + 4
                     + (cl < end ? std::stoul(req.substr(cl + 16)) : 0);
            }
          }
          std::this_thread::sleep_for(1s);
          std::string res = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n"
                            "Connection: close\r\n\r\n";
          [[maybe_unused]] auto n = ::write(c, res.data(), res.size());
          ::close(c);
        }}.detach();
      }
    }
    ::close(lfd);
  }

  ~slow_forked_server() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }

  std::string url() const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/second";
  }

private:
  pid_t pid_ = -1;
  int port_ = 0;
};

BOOST_AUTO_TEST_CASE(hundreds_of_requests_in_flight_on_one_thread) {
  BOOST_REQUIRE(threads_of_this_process() == 1);
  slow_forked_server server;
  auto reg = registry_for(server.url());
  auto threads = threads_of_this_process();
  constexpr int n = 200;
  std::mutex mtx;
  std::condition_variable cv;
  int completed = 0, failed = 0;
  int peak_threads = 0;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    auto job = make_job();
    job.id = i + 1;
    reg->start(job, aw::async_context{}, [&](aw::job_outcome o) {
      std::lock_guard<std::mutex> guard{mtx};
      ++(o.kind == aw::outcome_kind::completed ? completed : failed);
      if (o.kind != aw::outcome_kind::completed)
        BOOST_TEST_MESSAGE("failed: " << o.message);
      cv.notify_all();
    });
  }
  std::this_thread::sleep_for(500ms); // all in flight now
  peak_threads = threads_of_this_process();
  std::unique_lock<std::mutex> guard{mtx};
  BOOST_REQUIRE(cv.wait_for(guard, 60s, [&] { return completed + failed == n; }));
  auto took = std::chrono::steady_clock::now() - start;
  BOOST_TEST_MESSAGE(n << " requests of 1 s each in "
                       << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                       << " ms; threads " << threads << " -> " << peak_threads);
  BOOST_TEST(completed == n);
  // The client's thread started with the registration: no more.
  BOOST_TEST(peak_threads == threads);
  BOOST_TEST((took < 10s));
}

BOOST_AUTO_TEST_SUITE_END()
