// The dashboard's request checks one by one (app/dashboard_security.hpp):
// the Host allowlist (DNS rebinding), the Origin and Sec-Fetch-Site of
// actions (CSRF), their content type and method, the token, read_only and
// protect_reads; the [http] keys that configure them, with file:line:key
// errors; the observer's throughput ring and latest sample.

#include <boost/test/unit_test.hpp>

#include <cstdlib>

#include <nlohmann/json.hpp>

#include "actor_worker/app/dashboard_security.hpp"
#include "actor_worker/app/prometheus_observer.hpp"
#include "actor_worker/config/config.hpp"

namespace {

const std::string token = "s3cret-token-0123456789";

std::string error_of(const std::string& text) {
  try {
    aw::parse_config(text, "worker.toml");
  } catch (const aw::config_error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

aw::dashboard_policy policy(const std::string& toml) {
  auto cfg = aw::parse_config(toml, "worker.toml");
  return aw::dashboard_policy::from(cfg.http, cfg.http.resolve_token());
}

aw::dashboard_policy default_policy() {
  return policy("[http]\nlisten = \"127.0.0.1:9464\"\ntoken = \"" + token
                + "\"\n");
}

/// A same-origin action as the page sends it.
aw::request_facts good_action() {
  aw::request_facts r;
  r.method = "POST";
  r.host = "127.0.0.1:9464";
  r.origin = "http://127.0.0.1:9464";
  r.sec_fetch_site = "same-origin";
  r.content_type = "application/json";
  r.authorization = "Bearer " + token;
  return r;
}

aw::request_facts good_read() {
  aw::request_facts r;
  r.method = "GET";
  r.host = "localhost:9464";
  return r;
}

int status(const aw::dashboard_policy& p, const aw::request_facts& r,
           aw::dashboard_access a) {
  return aw::check_request(p, r, a).status;
}

} // namespace

BOOST_AUTO_TEST_SUITE(dashboard_security)

BOOST_AUTO_TEST_CASE(default_allowed_hosts_are_the_listen_address_and_loopback) {
  auto p = default_policy();
  BOOST_TEST(p.allowed_hosts
             == (std::vector<std::string>{"127.0.0.1:9464", "localhost:9464",
                                          "[::1]:9464"}));
  for (auto* host : {"127.0.0.1:9464", "localhost:9464", "LOCALHOST:9464",
                     "[::1]:9464", " localhost:9464 "})
    BOOST_TEST(aw::host_allowed(p, host), host);
  // DNS rebinding: a page of evil.example whose name now resolves to
  // 127.0.0.1 sends its own name.
  for (auto* host : {"evil.example:9464", "evil.example", "localhost:9465",
                     "127.0.0.1", "localhost", "", "127.0.0.1:9464/x",
                     "localhost:9464@evil.example", "127.0.0.2:9464",
                     "localhost.evil.example:9464"})
    BOOST_TEST(!aw::host_allowed(p, host), host);
  auto r = good_read();
  r.host = "evil.example:9464";
  for (auto a : {aw::dashboard_access::page, aw::dashboard_access::read,
                 aw::dashboard_access::action}) {
    auto no = aw::check_request(p, r, a);
    BOOST_TEST(no.status == 403);
    BOOST_TEST(contains(no.error, "allowed_hosts"));
  }
}

BOOST_AUTO_TEST_CASE(allowed_hosts_replace_the_default) {
  auto p = policy("[http]\nlisten = \"0.0.0.0:8080\"\n"
                  "allowed_hosts = [\"Dash.Example.com\", \"ops:443\", "
                  "\"[::1]\"]\n");
  BOOST_TEST(p.allowed_hosts
             == (std::vector<std::string>{"dash.example.com", "ops:443",
                                          "[::1]"}));
  // An entry without a port: its name on any port (the port a proxy in
  // front listens on); the name is what DNS rebinding changes.
  BOOST_TEST(aw::host_allowed(p, "dash.example.com:8080"));
  BOOST_TEST(aw::host_allowed(p, "dash.example.com"));
  BOOST_TEST(aw::host_allowed(p, "[::1]:1"));
  BOOST_TEST(aw::host_allowed(p, "ops:443"));
  // No port in the header: the scheme's (https behind a proxy).
  BOOST_TEST(aw::host_allowed(p, "ops"));
  BOOST_TEST(!aw::host_allowed(p, "ops:8443"));
  BOOST_TEST(!aw::host_allowed(p, "localhost:8080"));
  BOOST_TEST(!aw::host_allowed(p, "dash.example.com.evil.example"));
  // Port 80 is implied when the Host header has none.
  auto on80 = policy("[http]\nlisten = \"127.0.0.1:80\"\n");
  BOOST_TEST(aw::host_allowed(on80, "localhost"));
  BOOST_TEST(aw::host_allowed(on80, "localhost:80"));
  // The listen address of a named IPv6 host.
  auto v6 = policy("[http]\nlisten = \"[::1]:9464\"\n");
  BOOST_TEST(aw::host_allowed(v6, "[::1]:9464"));
  BOOST_TEST(aw::host_allowed(v6, "localhost:9464"));
}

BOOST_AUTO_TEST_CASE(actions_need_a_json_post_from_this_origin_with_the_token) {
  auto p = default_policy();
  using A = aw::dashboard_access;
  BOOST_TEST(status(p, good_action(), A::action) == 0);

  auto r = good_action();
  r.method = "GET";
  BOOST_TEST(status(p, r, A::action) == 405);

  for (auto* type : {"", "text/plain", "application/x-www-form-urlencoded",
                     "multipart/form-data; boundary=x", "application/jsonx",
                     "text/json"}) {
    r = good_action();
    r.content_type = type;
    BOOST_TEST(status(p, r, A::action) == 415, type);
  }
  r = good_action();
  r.content_type = "Application/JSON; charset=utf-8";
  BOOST_TEST(status(p, r, A::action) == 0);

  // Cross-site: another origin, a "null" origin, another port, a
  // cross-site fetch without an Origin.
  for (auto* origin : {"http://evil.example", "null", "http://127.0.0.1:9465",
                       "http://127.0.0.1", "file://", "127.0.0.1:9464",
                       "http://127.0.0.1:9464.evil.example"}) {
    r = good_action();
    r.origin = origin;
    BOOST_TEST(status(p, r, A::action) == 403, origin);
  }
  for (auto* site : {"cross-site", "same-site", "none"}) {
    r = good_action();
    r.origin.clear();
    r.sec_fetch_site = site;
    BOOST_TEST(status(p, r, A::action) == 403, site);
  }
  r = good_action();
  r.origin.clear();
  BOOST_TEST(status(p, r, A::action) == 0);
  // Neither header: not a browser (curl); the token still decides.
  r.sec_fetch_site.clear();
  BOOST_TEST(status(p, r, A::action) == 0);
  // Behind a proxy that terminates TLS the Origin says https: its host
  // and port are what must match the Host header.
  r = good_action();
  r.host = "dash.example:443";
  r.origin = "https://dash.example";
  BOOST_TEST(aw::same_origin(r));
  // The Origin names the same host in another spelling.
  r = good_action();
  r.host = "LOCALHOST:9464";
  r.origin = "http://localhost:9464";
  BOOST_TEST(status(p, r, A::action) == 0);
}

BOOST_AUTO_TEST_CASE(the_token_goes_in_a_bearer_header_only) {
  auto p = default_policy();
  using A = aw::dashboard_access;
  auto r = good_action();
  for (auto* auth : {"", "Bearer", "Bearer ", "Basic czNjcmV0",
                     "Bearer s3cret-token-012345678",
                     "Bearer s3cret-token-01234567890",
                     "Bearer S3CRET-TOKEN-0123456789", "s3cret-token-0123456789",
                     "Token s3cret-token-0123456789"}) {
    r.authorization = auth;
    auto no = aw::check_request(p, r, A::action);
    BOOST_TEST(no.status == 401, auth);
    BOOST_TEST(!contains(no.error, token));
  }
  r.authorization = "bearer  " + token + " ";
  BOOST_TEST(status(p, r, A::action) == 0);
  BOOST_TEST(aw::token_matches(p, "Bearer " + token));
  // No token configured: actions are off, whatever the request carries.
  auto none = policy("[http]\nlisten = \"127.0.0.1:9464\"\n");
  BOOST_TEST(!none.actions_enabled());
  r = good_action();
  auto no = aw::check_request(none, r, A::action);
  BOOST_TEST(no.status == 403);
  BOOST_TEST(contains(no.error, "no token is configured"));
  r.authorization = "Bearer ";
  BOOST_TEST(!aw::token_matches(none, "Bearer "));
  BOOST_TEST(!aw::token_matches(none, ""));
}

BOOST_AUTO_TEST_CASE(read_only_refuses_every_action_and_still_reads) {
  auto p = policy("[http]\nlisten = \"127.0.0.1:9464\"\nread_only = true\n"
                  "token = \"" + token + "\"\n");
  BOOST_TEST(!p.actions_enabled());
  auto no = aw::check_request(p, good_action(), aw::dashboard_access::action);
  BOOST_TEST(no.status == 403);
  BOOST_TEST(contains(no.error, "read-only"));
  BOOST_TEST(status(p, good_read(), aw::dashboard_access::read) == 0);
}

BOOST_AUTO_TEST_CASE(reads_are_open_unless_protect_reads) {
  using A = aw::dashboard_access;
  auto open = default_policy();
  BOOST_TEST(status(open, good_read(), A::read) == 0);
  auto r = good_read();
  r.method = "POST";
  BOOST_TEST(status(open, r, A::read) == 405);

  auto closed = policy("[http]\nlisten = \"127.0.0.1:9464\"\n"
                       "protect_reads = true\ntoken = \"" + token + "\"\n");
  BOOST_TEST(status(closed, good_read(), A::read) == 401);
  // The page itself holds no data: it loads, and asks for the token.
  BOOST_TEST(status(closed, good_read(), A::page) == 0);
  r = good_read();
  r.authorization = "Bearer " + token;
  BOOST_TEST(status(closed, r, A::read) == 0);
  r.authorization = "Bearer nope-nope-nope-nope";
  BOOST_TEST(status(closed, r, A::read) == 401);
}

BOOST_AUTO_TEST_CASE(security_headers_forbid_inline_script_and_framing) {
  std::map<std::string, std::string> h;
  for (auto& [k, v] : aw::security_headers())
    h[k] = v;
  auto csp = h["Content-Security-Policy"];
  BOOST_TEST(contains(csp, "script-src 'self'"));
  BOOST_TEST(contains(csp, "frame-ancestors 'none'"));
  BOOST_TEST(contains(csp, "default-src 'none'"));
  BOOST_TEST(!contains(csp, "unsafe-inline"));
  BOOST_TEST(!contains(csp, "unsafe-eval"));
  BOOST_TEST(h["X-Content-Type-Options"] == "nosniff");
  BOOST_TEST(h.count("Access-Control-Allow-Origin") == 0u);
}

BOOST_AUTO_TEST_CASE(http_dashboard_keys_parse_and_validate) {
  auto cfg = aw::parse_config(R"(
[http]
listen = "127.0.0.1:9464"
dashboard = true
token_env = "AW_TEST_DASH_TOKEN"
allowed_hosts = ["localhost:9464", "dash.internal"]
read_only = false
protect_reads = true
)",
                              "worker.toml");
  BOOST_TEST(cfg.http.dashboard);
  BOOST_TEST(cfg.http.protect_reads);
  BOOST_TEST(cfg.http.token_env == "AW_TEST_DASH_TOKEN");
  // The variable is read when the endpoint starts, not when the file is
  // loaded (admin commands share the file without the secret).
  ::unsetenv("AW_TEST_DASH_TOKEN");
  try {
    cfg.http.resolve_token();
    BOOST_FAIL("an unset token_env must be refused");
  } catch (const aw::config_error& e) {
    BOOST_TEST(contains(e.what(), "AW_TEST_DASH_TOKEN"));
  }
  ::setenv("AW_TEST_DASH_TOKEN", "short", 1);
  BOOST_CHECK_THROW(cfg.http.resolve_token(), aw::config_error);
  ::setenv("AW_TEST_DASH_TOKEN", token.c_str(), 1);
  BOOST_TEST(cfg.http.resolve_token() == token);
  ::unsetenv("AW_TEST_DASH_TOKEN");

  auto defaults = aw::parse_config("", "worker.toml");
  BOOST_TEST(defaults.http.dashboard);
  BOOST_TEST(!defaults.http.read_only);
  BOOST_TEST(!defaults.http.protect_reads);
  BOOST_TEST(defaults.http.resolve_token().empty());

  auto both = error_of("[http]\nlisten = \"127.0.0.1:1\"\ntoken = \"" + token
                       + "\"\ntoken_env = \"X\"\n");
  BOOST_TEST(contains(both, "worker.toml:4: key 'http.token_env'"), both);
  auto short_token = error_of("[http]\ntoken = \"abc\"\n");
  BOOST_TEST(contains(short_token, "worker.toml:2: key 'http.token'"),
             short_token);
  BOOST_TEST(contains(short_token, "at least 16"), short_token);
  BOOST_TEST(!contains(short_token, "abc"), short_token);
  auto spaced = error_of("[http]\ntoken = \"has a space in it, sixteen+\"\n");
  BOOST_TEST(contains(spaced, "key 'http.token'"), spaced);
  auto bad_env = error_of("[http]\ntoken_env = \"1X\"\n");
  BOOST_TEST(contains(bad_env, "worker.toml:2: key 'http.token_env'"), bad_env);
  auto naked = error_of("[http]\nlisten = \"127.0.0.1:1\"\n"
                        "protect_reads = true\n");
  BOOST_TEST(contains(naked, "worker.toml:3: key 'http.protect_reads'"), naked);
  auto host = error_of("[http]\nallowed_hosts = [\"ok\", \"http://x/\"]\n");
  BOOST_TEST(contains(host, "worker.toml:2: key 'http.allowed_hosts'"), host);
  BOOST_TEST(contains(host, "http://x/"), host);
  auto not_bool = error_of("[http]\nread_only = \"yes\"\n");
  BOOST_TEST(contains(not_bool, "worker.toml:2: key 'http.read_only': "
                                "expected true or false"),
             not_bool);
  auto not_array = error_of("[http]\nallowed_hosts = \"localhost\"\n");
  BOOST_TEST(contains(not_array, "expected an array of strings"), not_array);
  auto unknown = error_of("[http]\ntokn = \"x\"\n");
  BOOST_TEST(contains(unknown, "allowed here: allowed_hosts, dashboard, "
                               "listen, protect_reads, read_only, token, "
                               "token_env"),
             unknown);
}

BOOST_AUTO_TEST_CASE(normalize_host_port_forms) {
  BOOST_TEST(*aw::normalize_host_port("LocalHost") == "localhost");
  BOOST_TEST(*aw::normalize_host_port("a.b:1") == "a.b:1");
  BOOST_TEST(*aw::normalize_host_port("a:0080") == "a:80");
  BOOST_TEST(*aw::normalize_host_port("[::1]") == "[::1]");
  BOOST_TEST(*aw::normalize_host_port("[::FFFF:127.0.0.1]:5")
             == "[::ffff:127.0.0.1]:5");
  for (auto* bad : {"", ":80", "a:", "a:0", "a:65536", "a:1x", "a b:1",
                    "[::1", "[]:1", "[::1]x", "a/b", "a:1:2", "[zz]:1",
                    "user@host:1"})
    BOOST_TEST(!aw::normalize_host_port(bad).has_value(), bad);
}

BOOST_AUTO_TEST_CASE(the_observer_keeps_a_throughput_ring_and_the_last_sample) {
  aw::prometheus_observer obs{{"noop"}, {"default"}, "test"};
  BOOST_TEST(!obs.latest_sample().taken.has_value());
  aw::job_outcome o;
  o.job_id = 1;
  o.queue = "default";
  o.job_kind = "noop";
  for (int i = 0; i < 7; ++i)
    obs.recorded(o, aw::execution_result::completed);
  obs.recorded(o, aw::execution_result::dead_lettered);
  auto tp = obs.throughput_json();
  BOOST_TEST(tp["bucket_seconds"] == 10);
  auto& completed = tp["queues"]["default"]["completed"];
  BOOST_TEST(completed.size() == 60u);
  // The current interval is the last one.
  BOOST_TEST(completed.back().get<int>() == 7);
  BOOST_TEST(tp["queues"]["default"]["dead_lettered"].back().get<int>() == 1);
  int64_t sum = 0;
  for (auto& v : completed)
    sum += v.get<int64_t>();
  BOOST_TEST(sum == 7);

  aw::queue_samples samples(1);
  samples[0].queue = "default";
  samples[0].available = 42;
  samples[0].dead_lettered = 3;
  obs.sampled(samples);
  auto latest = obs.latest_sample();
  BOOST_TEST(latest.taken.has_value());
  BOOST_REQUIRE(latest.queues.size() == 1u);
  BOOST_TEST(latest.queues[0].available == 42);
  obs.slots("default", 3, 10);
  BOOST_TEST(obs.slots_by_queue()["default"].running == 3);
}

BOOST_AUTO_TEST_SUITE_END()
