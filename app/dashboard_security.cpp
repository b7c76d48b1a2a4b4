#include "actor_worker/app/dashboard_security.hpp"

#include <algorithm>
#include <cctype>

namespace aw {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) {
    return static_cast<char>(std::tolower(c));
  });
  return s;
}

std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos)
    return {};
  auto e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

/// A normalized "host[:port]" split in its name and port (0: none).
std::pair<std::string, int> split(const std::string& normalized) {
  auto colon = normalized.rfind(':');
  auto bracket = normalized.rfind(']');
  if (colon == std::string::npos
      || (bracket != std::string::npos && colon < bracket))
    return {normalized, 0};
  return {normalized.substr(0, colon), std::stoi(normalized.substr(colon + 1))};
}

} // namespace

dashboard_policy dashboard_policy::from(const http_config& cfg,
                                        std::string token) {
  dashboard_policy p;
  p.allowed_hosts = cfg.effective_allowed_hosts();
  p.token = std::move(token);
  p.read_only = cfg.read_only;
  p.protect_reads = cfg.protect_reads;
  return p;
}

bool host_allowed(const dashboard_policy& policy, const std::string& host) {
  auto normalized = normalize_host_port(trim(host));
  if (!normalized)
    return false;
  auto [name, port] = split(*normalized);
  for (auto& entry : policy.allowed_hosts) {
    auto [allowed_name, allowed_port] = split(entry);
    if (name != allowed_name)
      continue;
    if (allowed_port == 0 || port == allowed_port
        || (port == 0 && (allowed_port == 80 || allowed_port == 443)))
      return true;
  }
  return false;
}

bool same_origin(const request_facts& req) {
  auto origin = lower(trim(req.origin));
  if (!origin.empty()) {
    // "null" (a sandboxed frame, a file: page) is never this origin.
    std::string rest;
    if (origin.rfind("http://", 0) == 0)
      rest = origin.substr(7);
    else if (origin.rfind("https://", 0) == 0)
      rest = origin.substr(8);
    else
      return false;
    int default_port = origin[4] == 's' ? 443 : 80;
    auto from = normalize_host_port(rest);
    auto to = normalize_host_port(trim(req.host));
    if (!from || !to)
      return false;
    auto [from_name, from_port] = split(*from);
    auto [to_name, to_port] = split(*to);
    return from_name == to_name
           && (from_port ? from_port : default_port)
                == (to_port ? to_port : default_port);
  }
  auto site = lower(trim(req.sec_fetch_site));
  if (!site.empty())
    return site == "same-origin";
  return true;
}

bool json_content_type(const std::string& content_type) {
  auto type = lower(trim(content_type.substr(0, content_type.find(';'))));
  return type == "application/json";
}

bool token_matches(const dashboard_policy& policy,
                   const std::string& authorization) {
  if (policy.token.empty())
    return false;
  auto value = trim(authorization);
  if (value.size() < 7 || lower(value.substr(0, 7)) != "bearer ")
    return false;
  auto given = trim(value.substr(7));
  // Constant time in the token's length: no early exit on a mismatch.
  const auto& want = policy.token;
  unsigned char diff = given.size() == want.size() ? 0 : 1;
  for (size_t i = 0; i < want.size(); ++i) {
    unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i])
                                       : 0;
    diff |= static_cast<unsigned char>(g ^ static_cast<unsigned char>(want[i]));
  }
  return diff == 0;
}

refusal check_request(const dashboard_policy& policy, const request_facts& req,
                      dashboard_access access) {
  if (!host_allowed(policy, req.host))
    return {403, "the Host header is not one this dashboard answers to; add "
                 "it to [http] allowed_hosts if it is yours"};
  if (access == dashboard_access::page)
    return {};
  if (access == dashboard_access::read) {
    if (lower(req.method) != "get" && lower(req.method) != "head")
      return {405, "data is read with GET"};
    if (policy.protect_reads && !token_matches(policy, req.authorization))
      return {401, "this dashboard's data requires the token ([http] "
                   "protect_reads = true): send it as Authorization: Bearer "
                   "TOKEN"};
    return {};
  }
  if (policy.read_only)
    return {403, "the dashboard is read-only ([http] read_only = true): "
                 "every action is off"};
  if (lower(req.method) != "post")
    return {405, "actions are POST requests"};
  if (!json_content_type(req.content_type))
    return {415, "actions need Content-Type: application/json"};
  if (!same_origin(req))
    return {403, "cross-origin request refused: the Origin (or "
                 "Sec-Fetch-Site) is not this dashboard's"};
  if (policy.token.empty())
    return {403, "actions are off: no token is configured (set [http] token "
                 "or token_env)"};
  if (!token_matches(policy, req.authorization))
    return {401, "this action requires the token: send it as "
                 "Authorization: Bearer TOKEN"};
  return {};
}

const std::vector<std::pair<std::string, std::string>>& security_headers() {
  static const std::vector<std::pair<std::string, std::string>> headers = {
    {"Content-Security-Policy",
     "default-src 'none'; script-src 'self'; style-src 'self'; "
     "img-src 'self' data:; connect-src 'self'; base-uri 'none'; "
     "form-action 'none'; frame-ancestors 'none'"},
    {"X-Content-Type-Options", "nosniff"},
    {"X-Frame-Options", "DENY"},
    {"Referrer-Policy", "no-referrer"},
    {"Cross-Origin-Opener-Policy", "same-origin"},
    {"Cross-Origin-Resource-Policy", "same-origin"},
    {"Cache-Control", "no-store"},
  };
  return headers;
}

} // namespace aw
