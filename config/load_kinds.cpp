// [kinds.NAME]: job kinds that run a program (command = [...]) or POST to a
// URL (http = {...}), and the ${NAME} references of their headers.

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <functional>
#include <string>

#include "actor_worker/config/internal/load_parts.hpp"

namespace aw {

using namespace config_detail;

namespace {

/// `value` with every `${NAME}` replaced by `lookup(NAME)`; a malformed
/// reference, or a variable `lookup` does not know (nullptr), is an error
/// at `at` (never quoting the value: it is a secret).
std::string expand_variables(
  const std::string& value, const std::string& at,
  const std::function<const char*(const std::string&)>& lookup) {
  std::string out;
  size_t pos = 0;
  while (pos < value.size()) {
    auto open = value.find("${", pos);
    if (open == std::string::npos) {
      out.append(value, pos, std::string::npos);
      break;
    }
    out.append(value, pos, open - pos);
    auto close = value.find('}', open + 2);
    if (close == std::string::npos)
      throw config_error(at + ": '${' without a closing '}'");
    auto name = value.substr(open + 2, close - open - 2);
    bool valid = !name.empty()
                 && !std::isdigit(static_cast<unsigned char>(name[0]));
    for (char c : name)
      valid = valid
              && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
    if (!valid)
      throw config_error(at + ": '${" + name
                         + "}' is not an environment variable name (letters, "
                           "digits and '_', not starting with a digit)");
    auto found = lookup(name);
    if (found == nullptr)
      throw config_error(at + ": environment variable " + name
                         + " is not set");
    out += found;
    pos = close + 1;
  }
  return out;
}

/// A header value holds a line break or NUL (header injection).
void check_header_value(const std::string& value, const std::string& at) {
  if (value.find_first_of("\r\n", 0) != std::string::npos
      || value.find('\0') != std::string::npos)
    throw config_error(at + ": the value contains a line break or NUL");
}

/// True for a character that may not appear in a header or variable name.
bool bad_name_char(char c, bool header) {
  auto u = static_cast<unsigned char>(c);
  if (u <= 0x20 || u >= 0x7f)
    return true;
  if (header)
    return std::string{"()<>@,;:\\\"/[]?={}"}.find(c) != std::string::npos;
  return c == '=';
}

/// Checks that every key of table `key` is a valid name (of a header or an
/// environment variable) and every value a string; calls `fn(name, value,
/// where)` for each, sorted by name.
template <class F>
void read_string_table(const std::string& source, const toml::table& t,
                       const std::string& prefix, const char* key, bool header,
                       F fn) {
  auto table = sub_table(source, t, key, prefix);
  if (!table)
    return;
  for (auto&& [k, v] : *table) {
    std::string name{k.str()};
    auto full = prefix + key + "." + name;
    if (name.empty()
        || std::any_of(name.begin(), name.end(),
                       [&](char c) { return bad_name_char(c, header); }))
      throw config_error(where(source, v, full) + ": not a valid "
                         + (header ? "header" : "variable") + " name");
    if (!v.is_string())
      throw config_error(where(source, v, full) + ": expected a string");
    auto value = *v.template value<std::string>();
    if (value.find('\0') != std::string::npos)
      throw config_error(where(source, v, full) + ": the value contains NUL");
    fn(std::move(name), std::move(value), where(source, v, full));
  }
}

command_kind_config read_command_kind(const std::string& source,
                                      const toml::table& k,
                                      const std::string& p) {
  command_kind_config c;
  auto& node = *k.get("command");
  auto array = node.as_array();
  if (!array)
    throw config_error(where(source, node, p + "command")
                       + ": expected an array of strings such as "
                         "[\"python3\", \"send.py\"] (run without a shell)");
  if (array->empty())
    throw config_error(where(source, node, p + "command")
                       + ": must name a program");
  for (auto&& element : *array) {
    if (!element.is_string())
      throw config_error(where(source, element, p + "command")
                         + ": expected an array of strings");
    auto arg = *element.value<std::string>();
    if (arg.find('\0') != std::string::npos)
      throw config_error(where(source, element, p + "command")
                         + ": an argument contains NUL");
    c.argv.push_back(std::move(arg));
  }
  if (c.argv.front().empty())
    throw config_error(where(source, node, p + "command")
                       + ": the program name is empty");
  read_string_table(source, k, p, "env", false,
                    [&](std::string name, std::string value, std::string) {
                      c.env.emplace_back(std::move(name), std::move(value));
                    });
  read_string(source, k, p, "cwd", c.cwd);
  if (k.get("cwd") && (c.cwd.empty() || c.cwd.find('\0') != std::string::npos))
    throw config_error(where(source, *k.get("cwd"), p + "cwd")
                       + ": expected a directory");
  read_duration(source, k, p, "timeout", c.timeout);
  read_duration(source, k, p, "kill_grace", c.kill_grace);
  return c;
}

http_kind_config read_http_kind(const std::string& source,
                                const toml::table& k, const std::string& p) {
  http_kind_config h;
  auto table = sub_table(source, k, "http", p);
  auto hp = p + "http.";
  reject_unknown(source, *table, hp,
                 {"url", "headers", "timeout", "max_retry_after"});
  auto url = table->get("url");
  if (!url)
    throw config_error(where(source, *table, p + "http")
                       + ": missing key 'url'");
  read_string(source, *table, hp, "url", h.url);
  auto lower = h.url.substr(0, 8);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  auto scheme = lower.rfind("https://", 0) == 0  ? 8
                : lower.rfind("http://", 0) == 0 ? 7
                                                 : 0;
  if (scheme == 0 || h.url.size() == static_cast<size_t>(scheme)
      || h.url[scheme] == '/'
      || std::any_of(h.url.begin(), h.url.end(), [](char c) {
           return static_cast<unsigned char>(c) <= 0x20
                  || static_cast<unsigned char>(c) == 0x7f;
         }))
    throw config_error(where(source, *url, hp + "url")
                       + ": expected an http:// or https:// URL with a host");
  read_string_table(
    source, *table, hp, "headers", true,
    [&](std::string name, std::string value, std::string at) {
      // The references' syntax now; their values when `run` registers the
      // kind (resolve_header_variables).
      check_header_value(
        expand_variables(value, at, [](const std::string&) { return ""; }),
        at);
      h.headers.push_back({std::move(name), std::move(value), std::move(at)});
    });
  read_duration(source, *table, hp, "timeout", h.timeout);
  if (h.timeout.count() <= 0)
    throw config_error(where(source, at(*table, "timeout"), hp + "timeout")
                       + ": must be greater than 0");
  read_duration(source, *table, hp, "max_retry_after", h.max_retry_after);
  if (h.max_retry_after.count() <= 0)
    throw config_error(where(source, at(*table, "max_retry_after"),
                             hp + "max_retry_after")
                       + ": must be greater than 0");
  return h;
}

} // namespace

namespace config_detail {

void read_kinds(const std::string& source, const toml::table& kinds,
                runtime_config& cfg) {
  for (auto&& [key, value] : kinds) {
    std::string name{key.str()};
    std::string p = "kinds." + name + ".";
    if (!value.is_table())
      throw config_error(where(source, value, "kinds." + name)
                         + ": expected a table ([kinds." + name + "])");
    check_name(source, value, "kinds." + name, name, "kind");
    auto& k = *value.as_table();
    bool command = k.contains("command");
    bool http = k.contains("http");
    if (command == http)
      throw config_error(
        where(source, value, "kinds." + name)
        + (command ? ": has both 'command' and 'http'; a kind runs one way"
                   : ": needs 'command' (a program to run) or 'http' (a URL "
                     "to POST to)"));
    kind_config kc;
    kc.name = name;
    kc.where = source + ":" + std::to_string(value.source().begin.line);
    if (command) {
      reject_unknown(source, k, p,
                     {"command", "env", "cwd", "timeout", "kill_grace",
                      "callback_timeout"});
      kc.command = read_command_kind(source, k, p);
    } else {
      reject_unknown(source, k, p, {"http", "callback_timeout"});
      kc.http = read_http_kind(source, k, p);
    }
    if (auto node = k.get("callback_timeout")) {
      std::chrono::milliseconds timeout{0};
      read_duration(source, k, p, "callback_timeout", timeout);
      if (timeout.count() <= 0 || timeout > defaults::max_duration)
        throw config_error(where(source, *node, p + "callback_timeout")
                           + ": must be more than 0 and at most 36500 days");
      kc.callback_timeout = timeout;
    }
    cfg.kinds.push_back(std::move(kc));
  }
}

} // namespace config_detail

void resolve_header_variables(http_kind_config& kind) {
  for (auto& h : kind.headers) {
    h.value = expand_variables(h.value, h.where, [](const std::string& name) {
      return std::getenv(name.c_str());
    });
    check_header_value(h.value, h.where);
  }
}

} // namespace aw
