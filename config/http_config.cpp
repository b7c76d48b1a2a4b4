// [http]: the endpoint's listen address, its allowed Host headers and the
// dashboard's token.

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "actor_worker/config/internal/load_parts.hpp"

namespace aw {

using namespace config_detail;

namespace {

bool is_variable_name(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0])))
    return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

/// A token must be sent in a header: printable ASCII without spaces, and
/// long enough not to be guessed. Never quotes it.
void check_token(const std::string& token, const std::string& what) {
  if (token.size() < defaults::http_min_token_length)
    throw config_error(what + " must be at least "
                       + std::to_string(defaults::http_min_token_length)
                       + " characters long");
  for (char c : token) {
    auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f)
      throw config_error(what + " may hold printable ASCII characters only "
                                "(no spaces): it is sent in a header");
  }
}

/// Splits "HOST:PORT" / "[V6]:PORT"; throws config_error saying what is
/// wrong.
std::pair<std::string, int> split_listen(const std::string& listen) {
  auto colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == listen.size())
    throw config_error("expected \"HOST:PORT\" (for example "
                       "\"127.0.0.1:9464\"), got \"" + listen + "\"");
  auto host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  auto port_text = listen.substr(colon + 1);
  int port = 0;
  for (char c : port_text) {
    if (c < '0' || c > '9' || port > 65535)
      throw config_error("the port of \"" + listen
                         + "\" is not a number from 1 to 65535");
    port = port * 10 + (c - '0');
  }
  if (port < 1 || port > 65535 || host.empty())
    throw config_error("the port of \"" + listen
                       + "\" is not a number from 1 to 65535");
  return {host, port};
}

} // namespace

namespace config_detail {

void validate_http_dashboard(const http_config& http) {
  if (!http.token.empty() && !http.token_env.empty())
    throw config_error("http.token_env and http.token are both set: the "
                       "token comes from one of them");
  if (!http.token.empty())
    check_token(http.token, "http.token");
  if (!http.token_env.empty() && !is_variable_name(http.token_env))
    throw config_error("http.token_env must name an environment variable "
                       "(letters, digits and '_', not starting with a "
                       "digit)");
  if (http.protect_reads && http.token.empty() && http.token_env.empty())
    throw config_error("http.protect_reads needs a token: set http.token or "
                       "http.token_env");
  for (auto& entry : http.allowed_hosts)
    if (!normalize_host_port(entry))
      throw config_error("http.allowed_hosts has \"" + entry
                         + "\", which is not a host name or address, with or "
                           "without a port (\"localhost:9464\", "
                           "\"dash.example.com\", \"[::1]:9464\")");
}

} // namespace config_detail

std::optional<std::string> normalize_host_port(const std::string& text) {
  if (text.empty() || text.size() > 300)
    return std::nullopt;
  std::string host;
  std::string port;
  if (text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string::npos || close == 1)
      return std::nullopt;
    host = text.substr(1, close - 1);
    auto rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':')
        return std::nullopt;
      port = rest.substr(1);
      if (port.empty())
        return std::nullopt;
    }
    for (char c : host)
      if (!std::isxdigit(static_cast<unsigned char>(c)) && c != ':'
          && c != '.')
        return std::nullopt;
    host = "[" + host + "]";
  } else {
    auto colon = text.find(':');
    host = text.substr(0, colon);
    if (colon != std::string::npos) {
      port = text.substr(colon + 1);
      if (port.empty())
        return std::nullopt;
    }
    if (host.empty())
      return std::nullopt;
    for (char c : host)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-'
          && c != '.' && c != '_')
        return std::nullopt;
  }
  int p = 0;
  if (!port.empty()) {
    if (port.size() > 5)
      return std::nullopt;
    for (char c : port) {
      if (c < '0' || c > '9')
        return std::nullopt;
      p = p * 10 + (c - '0');
    }
    if (p < 1 || p > 65535)
      return std::nullopt;
  }
  std::string out;
  for (char c : host)
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (p == 0)
    return out;
  return out + ":" + std::to_string(p);
}

std::vector<std::string> http_config::effective_allowed_hosts() const {
  std::vector<std::string> out;
  auto add = [&](const std::string& entry) {
    if (auto n = normalize_host_port(entry))
      if (std::find(out.begin(), out.end(), *n) == out.end())
        out.push_back(*n);
  };
  if (!allowed_hosts.empty()) {
    for (auto& e : allowed_hosts)
      add(e);
    return out;
  }
  std::string suffix = listen.empty() ? "" : ":" + std::to_string(port());
  if (!listen.empty()) {
    auto h = host();
    add((h.find(':') != std::string::npos ? "[" + h + "]" : h) + suffix);
  }
  for (auto* local : {"localhost", "127.0.0.1", "[::1]"})
    add(local + suffix);
  return out;
}

std::string http_config::resolve_token() const {
  if (!token.empty())
    return token;
  if (token_env.empty())
    return {};
  const char* value = std::getenv(token_env.c_str());
  if (value == nullptr || *value == '\0')
    throw config_error("http.token_env names " + token_env
                       + ", which is not set (or empty) in this process's "
                         "environment");
  std::string t{value};
  check_token(t, "the token in " + token_env + " (http.token_env)");
  return t;
}

std::string http_config::host() const {
  return split_listen(listen).first;
}

int http_config::port() const {
  return split_listen(listen).second;
}

} // namespace aw
