#pragma once
// A headless Chromium driven over the W3C WebDriver HTTP protocol: Debian's
// chromedriver (chromium-driver) as a child process, spoken to with
// cpp-httplib. No Selenium. Generous timeouts: the test machines are small
// and shared.

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include <boost/test/unit_test.hpp>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "fault_fixture.hpp"

namespace aw::fault {

/// Decodes standard base64 (a screenshot).
inline std::string base64_decode(const std::string& in) {
  static const std::string chars
    = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  int value = 0;
  int bits = -8;
  for (char c : in) {
    auto pos = chars.find(c);
    if (pos == std::string::npos)
      continue;
    value = (value << 6) + static_cast<int>(pos);
    bits += 6;
    if (bits >= 0) {
      out.push_back(static_cast<char>((value >> bits) & 0xff));
      bits -= 8;
    }
  }
  return out;
}

class webdriver {
public:
  /// Starts chromedriver on a reserved port and a headless Chromium
  /// session whose profile lives in `dir`.
  explicit webdriver(const std::string& dir, int width = 1400,
                     int height = 1000)
    : dir_(dir) {
    driver_ = std::make_unique<worker_process>(
      "chromedriver",
      std::vector<std::string>{"--port=" + std::to_string(port_.port()),
                               "--allowed-ips=127.0.0.1"},
      "", dir, std::vector<std::string>{}, "/usr/bin/chromedriver");
    BOOST_REQUIRE_MESSAGE(
      wait_until(
        [&] {
          auto r = call("GET", "/status", nullptr, false);
          return r.is_object() && r["value"]["ready"] == true;
        },
        std::chrono::seconds{60}, std::chrono::milliseconds{250}),
      "chromedriver did not start: " << driver_->err());
    nlohmann::json caps{
      {"capabilities",
       {{"alwaysMatch",
         {{"browserName", "chrome"},
          {"pageLoadStrategy", "normal"},
          {"timeouts", {{"pageLoad", 120000}, {"script", 60000}}},
          {"goog:chromeOptions",
           {{"binary", "/usr/bin/chromium"},
            {"args",
             {"--headless=new", "--no-sandbox", "--disable-gpu",
              "--disable-dev-shm-usage", "--no-first-run",
              "--disable-extensions", "--hide-scrollbars",
              "--window-size=" + std::to_string(width) + ","
                + std::to_string(height),
              "--user-data-dir=" + dir + "/chromium-profile"}}}}}}}}};
    nlohmann::json created;
    // Chromium's first start on a loaded machine can take a while; one
    // retry covers a start that timed out.
    for (int attempt = 0; attempt < 2 && session_.empty(); ++attempt) {
      created = call("POST", "/session", caps, false);
      if (created.is_object() && created["value"].contains("sessionId"))
        session_ = created["value"]["sessionId"].get<std::string>();
    }
    BOOST_REQUIRE_MESSAGE(!session_.empty(),
                          "no browser session: " << created.dump() << "\n"
                                                 << driver_->err());
  }

  ~webdriver() {
    try {
      if (!session_.empty())
        call("DELETE", "/session/" + session_, nullptr, false);
      call("GET", "/shutdown", nullptr, false);
    } catch (...) {
    }
    if (driver_ && !driver_->wait_exit(std::chrono::seconds{10}))
      driver_->signal(SIGTERM);
  }

  webdriver(const webdriver&) = delete;
  webdriver& operator=(const webdriver&) = delete;

  /// Navigates and waits for the load.
  void open(const std::string& url) {
    session_call("POST", "/url", {{"url", url}});
  }

  /// Runs `script` (a function body) in the page; its return value.
  nlohmann::json js(const std::string& script,
                    const nlohmann::json& args = nlohmann::json::array()) {
    return session_call("POST", "/execute/sync",
                        {{"script", script}, {"args", args}})["value"];
  }

  /// Polls `script` until it returns true (or `timeout`); false on timeout.
  bool wait_js(const std::string& script,
               std::chrono::milliseconds timeout = std::chrono::seconds{60}) {
    return wait_until(
      [&] {
        auto v = js(script);
        return v.is_boolean() && v.get<bool>();
      },
      timeout, std::chrono::milliseconds{250});
  }

  /// The element matching `css`, or "" when there is none.
  std::string find(const std::string& css) {
    auto r = call("POST", "/session/" + session_ + "/element",
                  {{"using", "css selector"}, {"value", css}}, false);
    if (!r.is_object() || !r["value"].is_object())
      return {};
    for (auto& [key, value] : r["value"].items())
      if (key.rfind("element-", 0) == 0)
        return value.get<std::string>();
    return {};
  }

  /// Clicks the element matching `css` like a user (scrolled into view).
  /// Retries while it is missing or was replaced by a refresh.
  void click(const std::string& css) {
    bool done = wait_until(
      [&] {
        auto id = find(css);
        if (id.empty())
          return false;
        auto r = call("POST", "/session/" + session_ + "/element/" + id
                                + "/click",
                      nlohmann::json::object(), false);
        return r.is_object() && r["value"].is_null();
      },
      std::chrono::seconds{60}, std::chrono::milliseconds{250});
    BOOST_REQUIRE_MESSAGE(done, "cannot click " << css);
  }

  /// Types `text` into the element matching `css`.
  void type(const std::string& css, const std::string& text) {
    bool done = wait_until(
      [&] {
        auto id = find(css);
        if (id.empty())
          return false;
        call("POST", "/session/" + session_ + "/element/" + id + "/clear",
             nlohmann::json::object(), false);
        auto r = call("POST", "/session/" + session_ + "/element/" + id
                                + "/value",
                      {{"text", text}}, false);
        return r.is_object() && r["value"].is_null();
      },
      std::chrono::seconds{60}, std::chrono::milliseconds{250});
    BOOST_REQUIRE_MESSAGE(done, "cannot type into " << css);
  }

  /// Saves a PNG of the viewport to `path`.
  void screenshot(const std::string& path) {
    auto r = session_call("GET", "/screenshot", nullptr);
    std::ofstream out{path, std::ios::binary};
    out << base64_decode(r["value"].get<std::string>());
    BOOST_TEST_MESSAGE("screenshot: " << path);
  }

  /// Resizes the window (for a taller screenshot).
  void resize(int width, int height) {
    session_call("POST", "/window/rect", {{"width", width}, {"height", height}});
  }

private:
  nlohmann::json session_call(const std::string& method,
                              const std::string& path,
                              const nlohmann::json& body) {
    auto r = call(method, "/session/" + session_ + path, body, true);
    return r;
  }

  /// One WebDriver command; with `strict`, a failure fails the test.
  nlohmann::json call(const std::string& method, const std::string& path,
                      const nlohmann::json& body, bool strict) {
    httplib::Client client{"127.0.0.1", port_.port()};
    client.set_connection_timeout(10, 0);
    client.set_read_timeout(180, 0);
    client.set_write_timeout(30, 0);
    auto payload = body.is_null() ? std::string{} : body.dump();
    auto send = [&]() -> httplib::Result {
      if (method == "POST")
        return client.Post(path.c_str(), payload, "application/json");
      if (method == "DELETE")
        return client.Delete(path.c_str());
      return client.Get(path.c_str());
    };
    auto res = send();
    if (!res) {
      if (strict)
        BOOST_FAIL("WebDriver " << method << " " << path << ": no answer");
      return nullptr;
    }
    auto j = nlohmann::json::parse(res->body, nullptr, false);
    if (strict && res->status != 200)
      BOOST_FAIL("WebDriver " << method << " " << path << ": " << res->status
                              << " " << res->body.substr(0, 2000));
    return j;
  }

  std::string dir_;
  port_reservation port_;
  std::unique_ptr<worker_process> driver_;
  std::string session_;
};

} // namespace aw::fault
