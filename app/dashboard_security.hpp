#pragma once
// The dashboard's request checks, apart from any HTTP library so they can
// be tested one by one (test/unit/dashboard_security_test.cpp):
//
//   every dashboard request   the Host header is in the allowlist (a page
//                             of another site that rebinds its name to
//                             127.0.0.1 sends its own name: refused)
//   reads (/api/... GET)      with protect_reads, the token
//   actions (/api/... POST)   not read_only; POST; Content-Type
//                             application/json (an HTML form cannot send
//                             it); the Origin, or else Sec-Fetch-Site, is
//                             this same origin; a token is configured and
//                             the request carries it as
//                             `Authorization: Bearer TOKEN`
//
// The token is never read from a cookie or the URL, so a browser never
// sends it on its own: a cross-site request cannot carry it.

#include <string>
#include <vector>

#include "actor_worker/config/config.hpp"

namespace aw {

/// What a request asks for.
enum class dashboard_access {
  /// The page and its scripts: the Host check only (the page holds no
  /// data; with protect_reads it asks for the token).
  page,
  /// A data API (GET).
  read,
  /// An action (POST).
  action,
};

/// The parts of a request the checks look at ("" when absent).
struct request_facts {
  /// The request method (GET, POST ...).
  std::string method;
  /// The Host header.
  std::string host;
  /// The Origin header.
  std::string origin;
  /// The Sec-Fetch-Site header.
  std::string sec_fetch_site;
  /// The Content-Type header.
  std::string content_type;
  /// The Authorization header.
  std::string authorization;
};

/// The checks' settings, from [http].
struct dashboard_policy {
  /// Normalized "host" and "host:port" entries
  /// (http_config::effective_allowed_hosts).
  std::vector<std::string> allowed_hosts;
  /// Empty: no token configured (every action refused).
  std::string token;
  /// [http] read_only: every action is refused.
  bool read_only = false;
  /// [http] protect_reads: the data needs the token too.
  bool protect_reads = false;

  /// From the configuration, with the token already resolved
  /// (http_config::resolve_token).
  static dashboard_policy from(const http_config& cfg, std::string token);

  /// Actions can succeed at all: a token is set and not read-only.
  bool actions_enabled() const {
    return !token.empty() && !read_only;
  }
};

/// A refusal: the HTTP status and a message for the JSON body.
struct refusal {
  /// The HTTP status (0: not refused).
  int status = 0;
  /// The message for the JSON body.
  std::string error;
  /// True when the request is refused.
  explicit operator bool() const {
    return status != 0;
  }
};

/// Checks `req` for `access`; a default refusal (status 0) lets it through.
refusal check_request(const dashboard_policy& policy, const request_facts& req,
                      dashboard_access access);

/// The Host header is one of the allowed hosts: the same name, and the
/// same port when the entry has one (a Host without a port has its
/// scheme's: an entry's port 80 or 443 matches it).
bool host_allowed(const dashboard_policy& policy, const std::string& host);

/// The request comes from this origin: its Origin header names the scheme
/// and the same host as its Host header, or, without an Origin, its
/// Sec-Fetch-Site is "same-origin"; a request with neither (curl, a
/// script) is not a browser's and passes (the token still guards it).
bool same_origin(const request_facts& req);

/// Content-Type is application/json (parameters such as charset allowed).
bool json_content_type(const std::string& content_type);

/// The Authorization header is "Bearer TOKEN" with the configured token
/// (compared in constant time); false when no token is configured.
bool token_matches(const dashboard_policy& policy,
                   const std::string& authorization);

/// The security headers of every dashboard response: a strict
/// Content-Security-Policy (no inline script or style, nothing from
/// elsewhere, no framing), nosniff, no referrer, no caching of data.
const std::vector<std::pair<std::string, std::string>>& security_headers();

} // namespace aw
