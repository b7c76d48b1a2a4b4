// TOML -> runtime_config. Strict: every key is known, every value has the
// right type, and every complaint names the file, line and key.

#include <algorithm>
#include <cstdlib>
#include <cmath>
#include <map>
#include <set>
#include <cctype>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>

#include <unistd.h>

#include <toml++/toml.h>

#include "actor_worker/config/config.hpp"

namespace aw {

namespace {

std::string where(const std::string& source, const toml::node& node,
                  const std::string& key) {
  std::ostringstream out;
  out << source << ":" << node.source().begin.line << ": key '" << key << "'";
  return out.str();
}

std::string where(const std::string& source, const toml::table& table,
                  const std::string& key) {
  return where(source, static_cast<const toml::node&>(table), key);
}

/// The value of `key` in `t` when the file sets it, else the table: where
/// an error about that key points.
const toml::node& at(const toml::table& t, const char* key) {
  if (auto node = t.get(key))
    return *node;
  return t;
}

/// Every key the file sets, by its full name ("worker.poll_interval"), for
/// errors found after reading (cross-key checks) to point at their line.
void index_keys(const toml::table& t, const std::string& prefix,
                std::map<std::string, const toml::node*>& out) {
  for (auto&& [key, value] : t) {
    auto name = prefix + std::string{key.str()};
    out[name] = &value;
    if (value.is_table())
      index_keys(*value.as_table(), name + ".", out);
  }
}

/// Rejects keys of `table` that are not in `known`.
void reject_unknown(const std::string& source, const toml::table& table,
                    const std::string& prefix,
                    const std::set<std::string>& known) {
  for (auto&& [key, value] : table) {
    std::string name{key.str()};
    if (known.count(name) == 0) {
      std::string allowed;
      for (auto& k : known)
        allowed += (allowed.empty() ? "" : ", ") + k;
      throw config_error(where(source, value, prefix + name)
                         + ": unknown key (allowed here: " + allowed + ")");
    }
  }
}

/// Reads a string value.
void read_string(const std::string& source, const toml::table& t,
                 const std::string& prefix, const char* key, std::string& out) {
  auto node = t.get(key);
  if (!node)
    return;
  auto value = node->value<std::string>();
  if (!node->is_string() || !value)
    throw config_error(where(source, *node, prefix + key)
                       + ": expected a string");
  out = *value;
}

/// Reads a boolean value.
void read_bool(const std::string& source, const toml::table& t,
               const std::string& prefix, const char* key, bool& out) {
  auto node = t.get(key);
  if (!node)
    return;
  if (!node->is_boolean())
    throw config_error(where(source, *node, prefix + key)
                       + ": expected true or false");
  out = *node->value<bool>();
}

/// Reads an array of strings.
void read_string_array(const std::string& source, const toml::table& t,
                       const std::string& prefix, const char* key,
                       std::vector<std::string>& out) {
  auto node = t.get(key);
  if (!node)
    return;
  auto array = node->as_array();
  if (!array)
    throw config_error(where(source, *node, prefix + key)
                       + ": expected an array of strings");
  out.clear();
  for (auto&& element : *array) {
    if (!element.is_string())
      throw config_error(where(source, element, prefix + key)
                         + ": expected an array of strings");
    out.push_back(*element.value<std::string>());
  }
}

/// Reads an integer value within [min, max].
void read_int(const std::string& source, const toml::table& t,
              const std::string& prefix, const char* key, int& out, int64_t min,
              int64_t max) {
  auto node = t.get(key);
  if (!node)
    return;
  if (!node->is_integer())
    throw config_error(where(source, *node, prefix + key)
                       + ": expected an integer");
  auto v = node->value<int64_t>().value();
  if (v < min || v > max)
    throw config_error(where(source, *node, prefix + key) + ": "
                       + std::to_string(v) + " is out of range ["
                       + std::to_string(min) + ", " + std::to_string(max)
                       + "]");
  out = static_cast<int>(v);
}

/// Reads a duration string such as "250ms" or "2s".
void read_duration(const std::string& source, const toml::table& t,
                   const std::string& prefix, const char* key,
                   std::chrono::milliseconds& out) {
  auto node = t.get(key);
  if (!node)
    return;
  if (!node->is_string())
    throw config_error(where(source, *node, prefix + key)
                       + ": expected a duration string such as \"250ms\", "
                         "\"2s\", \"5m\" or \"24h\"");
  try {
    out = parse_duration(*node->value<std::string>());
  } catch (const std::invalid_argument& e) {
    throw config_error(where(source, *node, prefix + key) + ": " + e.what());
  }
}

/// Reads a byte size: an integer, or a string such as "64MiB".
void read_size(const std::string& source, const toml::table& t,
               const std::string& prefix, const char* key, int64_t& out,
               int64_t min) {
  auto node = t.get(key);
  if (!node)
    return;
  int64_t v;
  if (node->is_integer()) {
    v = node->value<int64_t>().value();
  } else if (node->is_string()) {
    try {
      v = parse_size(*node->value<std::string>());
    } catch (const std::invalid_argument& e) {
      throw config_error(where(source, *node, prefix + key) + ": " + e.what());
    }
  } else {
    throw config_error(where(source, *node, prefix + key)
                       + ": expected a size such as 67108864 or \"64MiB\"");
  }
  if (v < min)
    throw config_error(where(source, *node, prefix + key) + ": "
                       + std::to_string(v) + " is below the minimum of "
                       + std::to_string(min) + " bytes");
  out = v;
}

const toml::table* sub_table(const std::string& source, const toml::table& t,
                             const char* key, const std::string& prefix) {
  auto node = t.get(key);
  if (!node)
    return nullptr;
  if (!node->is_table())
    throw config_error(where(source, *node, prefix + key)
                       + ": expected a table ([" + prefix + key + "])");
  return node->as_table();
}

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

/// A kind, queue or schedule name as enqueue accepts it (name_problem):
/// 1 to max_name_length bytes, no control characters.
void check_name(const std::string& source, const toml::node& node,
                const std::string& key, const std::string& name,
                const char* what) {
  if (name_problem(name).empty())
    return;
  throw config_error(where(source, node, key) + ": a " + what
                     + " name must be 1 to "
                     + std::to_string(defaults::max_name_length)
                     + " bytes without control characters (this one "
                     + name_problem(name) + ")");
}

/// [kinds.NAME] tables.
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


/// [periodic.NAME] tables.
void read_periodic(const std::string& source, const toml::table& schedules,
                   runtime_config& cfg) {
  for (auto&& [key, value] : schedules) {
    std::string name{key.str()};
    const std::string section = "periodic." + name;
    const std::string p = section + ".";
    if (!value.is_table())
      throw config_error(where(source, value, section)
                         + ": expected a table ([" + section + "])");
    check_name(source, value, section, name, "schedule");
    auto& t = *value.as_table();
    reject_unknown(source, t, p,
                   {"cron", "kind", "args", "queue", "priority", "timezone",
                    "catch_up"});
    periodic_config pc;
    pc.name = name;
    pc.where = source + ":" + std::to_string(value.source().begin.line);
    for (auto* required : {"cron", "kind"})
      if (!t.contains(required))
        throw config_error(where(source, value, section) + ": missing key '"
                           + required + "'");
    read_string(source, t, p, "cron", pc.cron);
    cron_expression expression;
    try {
      expression = cron_expression::parse(pc.cron);
    } catch (const std::invalid_argument& e) {
      throw config_error(where(source, *t.get("cron"), p + "cron")
                         + ": invalid cron expression \"" + pc.cron
                         + "\": " + e.what());
    }
    read_string(source, t, p, "timezone", pc.timezone);
    try {
      check_time_zone(pc.timezone);
    } catch (const std::invalid_argument& e) {
      throw config_error(where(source, at(t, "timezone"), p + "timezone")
                         + ": " + e.what());
    }
    read_string(source, t, p, "kind", pc.kind);
    check_name(source, *t.get("kind"), p + "kind", pc.kind, "kind");
    if (auto args = t.get("args")) {
      if (!args->is_table())
        throw config_error(where(source, *args, p + "args")
                           + ": expected a table such as { to = \"ops\", "
                             "days = 7 } (the job's args)");
      std::ostringstream json;
      json << toml::json_formatter{*args->as_table()};
      pc.args_json = json.str();
    }
    read_string(source, t, p, "queue", pc.queue);
    if (t.contains("queue"))
      check_name(source, *t.get("queue"), p + "queue", pc.queue, "queue");
    read_int(source, t, p, "priority", pc.priority,
             std::numeric_limits<int32_t>::min(),
             std::numeric_limits<int32_t>::max());
    std::string catch_up = to_string(pc.catch_up);
    read_string(source, t, p, "catch_up", catch_up);
    if (catch_up == "latest")
      pc.catch_up = catch_up_policy::latest;
    else if (catch_up == "none")
      pc.catch_up = catch_up_policy::none;
    else
      throw config_error(where(source, at(t, "catch_up"), p + "catch_up")
                         + ": expected \"latest\" (enqueue the most recent "
                           "missed tick after downtime) or \"none\", got \""
                         + catch_up + "\"");
    cfg.periodic.push_back(std::move(pc));
  }
  std::sort(cfg.periodic.begin(), cfg.periodic.end(),
            [](const periodic_config& a, const periodic_config& b) {
              return a.name < b.name;
            });
}

} // namespace

const char* to_string(catch_up_policy p) {
  return p == catch_up_policy::none ? "none" : "latest";
}

cron_schedule periodic_config::schedule() const {
  return cron_schedule{cron_expression::parse(cron), timezone};
}

void resolve_header_variables(http_kind_config& kind) {
  for (auto& h : kind.headers) {
    h.value = expand_variables(h.value, h.where, [](const std::string& name) {
      return std::getenv(name.c_str());
    });
    check_header_value(h.value, h.where);
  }
}

std::pair<int, std::chrono::milliseconds>
parse_rate_limit(const std::string& text) {
  auto fail = [&](const std::string& why) {
    return std::invalid_argument("invalid rate limit \"" + text + "\": " + why
                                 + " (write \"N/s\" or \"N/m\", e.g. "
                                   "\"10/s\", \"600/m\")");
  };
  auto slash = text.find('/');
  if (slash == std::string::npos)
    throw fail("expected \"/s\" or \"/m\" after the number");
  auto number = text.substr(0, slash);
  auto unit = text.substr(slash + 1);
  if (number.empty() || number.size() > 9
      || !std::all_of(number.begin(), number.end(), [](char c) {
           return std::isdigit(static_cast<unsigned char>(c));
         }))
    throw fail("expected a whole number of jobs before the '/'");
  auto n = std::stoll(number);
  if (n < 1 || n > defaults::max_rate_limit)
    throw fail("the number of jobs must be from 1 to "
               + std::to_string(defaults::max_rate_limit));
  std::chrono::milliseconds period;
  if (unit == "s")
    period = std::chrono::seconds{1};
  else if (unit == "m")
    period = std::chrono::minutes{1};
  else
    throw fail("unknown period \"" + unit + "\" (only s and m)");
  return {static_cast<int>(n), period};
}

std::string name_problem(const std::string& name) {
  if (name.empty())
    return "must not be empty";
  if (name.size() > defaults::max_name_length)
    return "is " + std::to_string(name.size()) + " bytes long, more than the "
           + std::to_string(defaults::max_name_length) + " allowed";
  for (unsigned char c : name)
    if (c < 0x20 || c == 0x7f)
      return "contains a control character";
  return {};
}

std::chrono::milliseconds parse_duration(const std::string& text) {
  auto fail = [&](const std::string& why) {
    return std::invalid_argument("invalid duration \"" + text + "\": " + why
                                 + " (write e.g. \"250ms\", \"2s\", \"5m\", "
                                   "\"24h\")");
  };
  if (text == "0")
    return std::chrono::milliseconds{0};
  // Digits, optionally one '.' and more digits ("1.5"), then the unit.
  size_t pos = 0;
  auto digits = [&] {
    auto start = pos;
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos])))
      ++pos;
    return pos - start;
  };
  if (digits() == 0)
    throw fail("expected a number first");
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    if (digits() == 0)
      throw fail("expected digits after the decimal point");
  }
  if (pos < text.size() && text[pos] == '.')
    throw fail("more than one decimal point");
  double number;
  try {
    number = std::stod(text.substr(0, pos));
  } catch (...) {
    throw fail("bad number");
  }
  auto unit = text.substr(pos);
  double ms_per_unit;
  if (unit == "ms")
    ms_per_unit = 1;
  else if (unit == "s")
    ms_per_unit = 1000;
  else if (unit == "m")
    ms_per_unit = 60'000;
  else if (unit == "h")
    ms_per_unit = 3'600'000;
  else if (unit == "d")
    ms_per_unit = 86'400'000;
  else if (unit.empty())
    throw fail("missing unit");
  else
    throw fail("unknown unit \"" + unit + "\"");
  double ms = number * ms_per_unit;
  if (!std::isfinite(ms)
      || ms > static_cast<double>(defaults::max_duration.count()))
    throw fail("longer than the maximum of "
               + std::to_string(defaults::max_duration.count() / 86'400'000)
               + "d");
  return std::chrono::milliseconds{static_cast<int64_t>(std::llround(ms))};
}

int64_t parse_size(const std::string& text) {
  auto fail = [&](const std::string& why) {
    return std::invalid_argument("invalid size \"" + text + "\": " + why
                                 + " (write e.g. \"65536\", \"512KiB\", "
                                   "\"64MiB\", \"1GiB\")");
  };
  size_t pos = 0;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos])))
    ++pos;
  if (pos == 0)
    throw fail("expected a number first");
  if (pos > 15)
    throw fail("too large");
  auto number = std::stoll(text.substr(0, pos));
  auto unit = text.substr(pos);
  int64_t factor;
  if (unit.empty() || unit == "B")
    factor = 1;
  else if (unit == "KiB")
    factor = int64_t{1} << 10;
  else if (unit == "MiB")
    factor = int64_t{1} << 20;
  else if (unit == "GiB")
    factor = int64_t{1} << 30;
  else if (unit == "kB")
    factor = 1000;
  else if (unit == "MB")
    factor = 1000 * 1000;
  else if (unit == "GB")
    factor = 1000 * 1000 * 1000;
  else
    throw fail("unknown unit \"" + unit + "\"");
  if (number > (int64_t{1} << 50) / factor)
    throw fail("too large");
  return number * factor;
}

std::string format_duration(std::chrono::milliseconds d) {
  auto ms = d.count();
  if (ms % 3'600'000 == 0 && ms != 0)
    return std::to_string(ms / 3'600'000) + "h";
  if (ms % 60'000 == 0 && ms != 0)
    return std::to_string(ms / 60'000) + "m";
  if (ms % 1000 == 0)
    return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

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

/// The [http] keys of the dashboard: a message starts with the key, so the
/// loader points at its line.
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

/// [databases.NAME] and [queues.Q] database: names, sizes, and no two
/// databases on one URL (their leaders and queue maps would clash).
void validate_databases(const runtime_config& cfg) {
  std::set<std::string> names{defaults::database_name};
  std::map<std::string, std::string> urls;
  if (!cfg.database.url.empty())
    urls[cfg.database.url] = "database.url";
  for (auto& d : cfg.databases) {
    const std::string p = "databases." + d.name;
    if (d.name.empty() || d.name == defaults::database_name)
      throw config_error(p + " is not a valid name: the default database is "
                             "the [database] section");
    if (!names.insert(d.name).second)
      throw config_error(p + " is configured twice");
    if (d.settings.pool_size < 1)
      throw config_error(p + ".pool_size must be at least 1");
    if (d.settings.url.empty())
      throw config_error(p + ".url must not be empty");
    auto [at, fresh] = urls.emplace(d.settings.url, p + ".url");
    if (!fresh)
      throw config_error(p + ".url is the same as " + at->second
                         + ": each database must be named once");
  }
  for (auto& [queue, db] : cfg.queue_databases)
    if (names.count(db) == 0) {
      std::string known;
      for (auto& n : names)
        known += (known.empty() ? "" : ", ") + n;
      throw config_error("queues." + queue + ".database names '" + db
                         + "', which is not a database of this file (its "
                           "databases: " + known + ")");
    }
}

} // namespace

void runtime_config::validate() {
  if (database.pool_size < 1)
    throw config_error("database.pool_size must be at least 1");
  if (worker.node.empty())
    throw config_error("worker.node must not be empty");
  if (worker.poll_interval.count() <= 0)
    throw config_error("worker.poll_interval must be greater than 0");
  if (worker.max_retries < 0)
    throw config_error("worker.max_retries must not be negative");
  if (worker.shutdown_drain.count() < 0)
    throw config_error("worker.shutdown_drain must not be negative");
  if (worker.maintenance_interval.count() <= 0)
    throw config_error("worker.maintenance_interval must be greater than 0");
  if (worker.heartbeat_interval.count() <= 0)
    throw config_error("worker.heartbeat_interval must be greater than 0");
  if (worker.reclaim_window
      < worker.heartbeat_interval * defaults::min_heartbeats_per_window)
    throw config_error(
      "worker.reclaim_window (" + format_duration(worker.reclaim_window)
      + ") must be at least "
      + std::to_string(defaults::min_heartbeats_per_window)
      + " x worker.heartbeat_interval ("
      + format_duration(worker.heartbeat_interval)
      + "), so a lease survives a slow heartbeat and the watchdog can "
        "abandon a job before another worker reclaims it");
  if (worker.idle_poll_permits < 0)
    throw config_error("worker.idle_poll_permits must not be negative");
  if (worker.local_queue_size < 1)
    throw config_error("worker.local_queue_size must be at least 1");
  if (worker.local_queue_bytes < 1)
    throw config_error("worker.local_queue_bytes must be at least 1");
  if (scheduler.threads < 0)
    throw config_error("scheduler.threads must not be negative");
  if (scheduler.policy != "sharing" && scheduler.policy != "stealing")
    throw config_error("scheduler.policy must be \"sharing\" or "
                       "\"stealing\", not \"" + scheduler.policy + "\"");
  if (queues.empty())
    queues.push_back(queue_config{});
  std::set<std::string> seen;
  for (auto& q : queues) {
    if (q.name.empty())
      throw config_error("queue names must not be empty");
    if (!seen.insert(q.name).second)
      throw config_error("queue '" + q.name + "' is configured twice");
    if (q.concurrency < 1)
      throw config_error("queues." + q.name
                         + ".concurrency must be at least 1");
    if (q.deadline.count() < 0)
      throw config_error("queues." + q.name + ".deadline must not be negative");
    if (q.local_queue_size < 0)
      throw config_error("queues." + q.name
                         + ".local_queue_size must not be negative");
    if (q.local_queue_bytes < 0)
      throw config_error("queues." + q.name
                         + ".local_queue_bytes must not be negative");
    if (q.global_concurrency < 0)
      throw config_error("queues." + q.name
                         + ".global_concurrency must not be negative");
    if (q.rate_limit < 0
        || (q.rate_limit == 0) != (q.rate_period.count() == 0)
        || (q.rate_limit > 0 && q.rate_period != std::chrono::seconds{1}
            && q.rate_period != std::chrono::minutes{1}))
      throw config_error("queues." + q.name
                         + ".rate_limit must be N per second or per minute");
  }
  validate_http_dashboard(http);
  validate_databases(*this);
}

const std::string& runtime_config::database_of(const std::string& queue) const {
  static const std::string default_name = defaults::database_name;
  auto i = queue_databases.find(queue);
  return i == queue_databases.end() ? default_name : i->second;
}

const database_config&
runtime_config::database_named(const std::string& name) const {
  if (name.empty() || name == defaults::database_name)
    return database;
  for (auto& d : databases)
    if (d.name == name)
      return d.settings;
  std::string names;
  for (auto& n : database_names())
    names += (names.empty() ? "" : ", ") + n;
  throw config_error("no database named '" + name + "' (the configuration's "
                     "databases: " + names + ")");
}

std::vector<std::string> runtime_config::database_names() const {
  std::vector<std::string> names{defaults::database_name};
  for (auto& d : databases)
    names.push_back(d.name);
  return names;
}

runtime_config runtime_config::for_database(const std::string& name) const {
  runtime_config shard = *this;
  shard.database = database_named(name);
  shard.databases.clear();
  auto here = [&](const std::string& queue) {
    auto& db = database_of(queue);
    return db == name || (name.empty() && db == defaults::database_name);
  };
  shard.queues.clear();
  for (auto& q : queues)
    if (here(q.name))
      shard.queues.push_back(q);
  shard.periodic.clear();
  for (auto& p : periodic)
    if (here(p.queue))
      shard.periodic.push_back(p);
  return shard;
}

void runtime_config::require_database(const std::string& queue,
                                      const std::string& database,
                                      const std::string& what) const {
  auto& home = database_of(queue);
  if (home == database
      || (database.empty() && home == defaults::database_name))
    return;
  throw std::invalid_argument(
    what + " goes to queue '" + queue + "', which lives in database '" + home
    + "'; it is enqueued in the transaction of its trigger, in database '"
    + database + "', and a transaction cannot span two databases (send it "
      "to a queue of '" + database + "', or enqueue it from the handler)");
}

runtime_config runtime_config::routed(const std::string& name,
                                      const std::string& queue) const {
  std::string target = name;
  if (!queue.empty()) {
    auto& home = database_of(queue);
    if (!target.empty() && target != home)
      throw config_error("queue '" + queue + "' lives in database '" + home
                         + "', not '" + target + "' (--database " + target
                         + "); drop --database or name '" + home + "'");
    target = home;
  }
  runtime_config out = *this;
  out.database = database_named(target);
  return out;
}

namespace {

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

}

namespace {

/// The keys of [worker].
const std::set<std::string>& worker_keys() {
  static const std::set<std::string> keys{
    "node", "poll_interval", "max_retries", "shutdown_drain",
    "completed_retention", "dead_letter_retention", "maintenance_interval",
    "heartbeat_interval", "reclaim_window", "idle_poll_permits",
    "local_queue_size", "local_queue_bytes"};
  return keys;
}

/// Reads the [worker] keys `w` sets into `out`; `p` is their prefix in
/// messages ("worker.", or "nodes.NAME." for a node's overrides).
void read_worker(const std::string& source, const toml::table& w,
                 const std::string& p, worker_config& out_cfg) {
  auto& cfg_worker = out_cfg;
  read_string(source, w, p, "node", cfg_worker.node);
  read_duration(source, w, p, "poll_interval", cfg_worker.poll_interval);
  read_int(source, w, p, "max_retries", cfg_worker.max_retries, 0, 1000000);
  read_duration(source, w, p, "shutdown_drain", cfg_worker.shutdown_drain);
  read_duration(source, w, p, "completed_retention",
                cfg_worker.completed_retention);
  read_duration(source, w, p, "dead_letter_retention",
                cfg_worker.dead_letter_retention);
  read_duration(source, w, p, "maintenance_interval",
                cfg_worker.maintenance_interval);
  read_duration(source, w, p, "heartbeat_interval",
                cfg_worker.heartbeat_interval);
  read_duration(source, w, p, "reclaim_window", cfg_worker.reclaim_window);
  read_int(source, w, p, "idle_poll_permits", cfg_worker.idle_poll_permits,
           0, 100000);
  read_int(source, w, p, "local_queue_size", cfg_worker.local_queue_size,
           1, 100000);
  read_size(source, w, p, "local_queue_bytes",
            cfg_worker.local_queue_bytes, 1);
  if (cfg_worker.node.empty())
    throw config_error(where(source, at(w, "node"), p + "node")
                       + ": must not be empty");
  if (cfg_worker.poll_interval.count() <= 0)
    throw config_error(where(source, at(w, "poll_interval"),
                             p + "poll_interval")
                       + ": must be greater than 0");
}

/// Reads a [queues.NAME] table (or a node's [nodes.N.queues.NAME]) into
/// `qc`; `p` is the keys' prefix in messages.
/// `cluster_wide`: the top level's [queues.NAME], which may also set the
/// limits that hold for the whole cluster (a node's section may not: every
/// node must enforce the same ones).
/// [database] or [databases.NAME] (`p`: "database." or "databases.NAME.").
void read_database(const std::string& source, const toml::table& db,
                   const std::string& p, database_config& out) {
  reject_unknown(source, db, p,
                 {"url", "pool_size", "pooler", "listen_url",
                  "transactional_pool_size", "transaction_timeout"});
  read_string(source, db, p, "url", out.url);
  read_string(source, db, p, "listen_url", out.listen_url);
  read_string(source, db, p, "pooler", out.pooler);
  if (out.pooler != "none" && out.pooler != "transaction")
    throw config_error(where(source, *db.get("pooler"), p + "pooler")
                       + ": expected \"none\" or \"transaction\"");
  read_int(source, db, p, "pool_size", out.pool_size, 1, 64);
  read_int(source, db, p, "transactional_pool_size",
           out.transactional_pool_size, 1, 1000);
  read_duration(source, db, p, "transaction_timeout", out.transaction_timeout);
  if (out.transaction_timeout.count() <= 0)
    throw config_error(where(source, *db.get("transaction_timeout"),
                             p + "transaction_timeout")
                       + ": must be greater than 0");
}

void read_queue(const std::string& source, const toml::table& q,
                const std::string& p, queue_config& qc, bool cluster_wide) {
  for (const char* key : {"global_concurrency", "rate_limit", "database"})
    if (!cluster_wide && q.contains(key))
      throw config_error(where(source, *q.get(key), p + key)
                         + ": a cluster-wide setting; set it in the top "
                           "level's [queues." + qc.name + "], not per node");
  if (cluster_wide)
    reject_unknown(source, q, p,
                   {"concurrency", "deadline", "local_queue_size",
                    "local_queue_bytes", "transactional_group",
                    "global_concurrency", "rate_limit", "database"});
  else
    reject_unknown(source, q, p,
                   {"concurrency", "deadline", "local_queue_size",
                    "local_queue_bytes", "transactional_group"});
  read_int(source, q, p, "concurrency", qc.concurrency, 1, 100000);
  read_duration(source, q, p, "deadline", qc.deadline);
  read_int(source, q, p, "local_queue_size", qc.local_queue_size, 1, 100000);
  read_size(source, q, p, "local_queue_bytes", qc.local_queue_bytes, 1);
  read_int(source, q, p, "transactional_group", qc.transactional_group, 1,
           defaults::max_transactional_group);
  read_int(source, q, p, "global_concurrency", qc.global_concurrency, 1,
           defaults::max_global_concurrency);
  if (auto node = q.get("rate_limit")) {
    auto text = node->value<std::string>();
    if (!node->is_string() || !text)
      throw config_error(where(source, *node, p + "rate_limit")
                         + ": expected a string such as \"10/s\" or "
                           "\"600/m\"");
    try {
      auto [n, period] = parse_rate_limit(*text);
      qc.rate_limit = n;
      qc.rate_period = period;
    } catch (const std::invalid_argument& e) {
      throw config_error(where(source, *node, p + "rate_limit") + ": "
                         + e.what());
    }
  }
}

} // namespace

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

namespace {

/// Runs cfg.validate(); its message starts with the key it is about, which
/// `locate` turns into the node in the file that sets it (or null).
void validate_at(runtime_config& cfg, const std::string& source,
                 const std::function<std::pair<std::string, const toml::node*>(
                   const std::string&)>& locate) {
  try {
    cfg.validate();
  } catch (const config_error& e) {
    std::string message = e.what();
    auto key = message.substr(0, message.find(' '));
    auto [name, node] = locate(key);
    if (node)
      throw config_error(where(source, *node, name) + ": " + message);
    throw config_error(source + ": " + message);
  }
}

/// The node of `key` ("worker.poll_interval") in `root`, or null.
const toml::node* find_key(const toml::table& root, const std::string& key) {
  std::map<std::string, const toml::node*> keys;
  index_keys(root, "", keys);
  auto i = keys.find(key);
  return i == keys.end() ? nullptr : i->second;
}

/// The top level of a file: every section but [cluster] and [nodes].
runtime_config read_top_level(const toml::table& root,
                              const std::string& source) {
  runtime_config cfg;
  reject_unknown(source, root, "",
                 {"database", "databases", "worker", "scheduler", "queues",
                  "kinds", "periodic", "http", "metrics", "log", "cluster",
                  "nodes"});
  if (auto db = sub_table(source, root, "database", ""))
    read_database(source, *db, "database.", cfg.database);
  if (auto dbs = sub_table(source, root, "databases", "")) {
    for (auto&& [key, value] : *dbs) {
      std::string name{key.str()};
      std::string p = "databases." + name;
      if (!value.is_table())
        throw config_error(where(source, value, p)
                           + ": expected a table ([" + p + "])");
      if (name == defaults::database_name || name.empty())
        throw config_error(where(source, value, p)
                           + ": the default database is the [database] "
                             "section; name this one differently");
      named_database d;
      d.name = name;
      read_database(source, *value.as_table(), p + ".", d.settings);
      if (d.settings.url.empty())
        throw config_error(where(source, value, p)
                           + ": url is required (a further database has no "
                             "DATABASE_URL fallback)");
      cfg.databases.push_back(std::move(d));
    }
  }
  if (auto w = sub_table(source, root, "worker", "")) {
    reject_unknown(source, *w, "worker.", worker_keys());
    read_worker(source, *w, "worker.", cfg.worker);
  }
  if (auto sc = sub_table(source, root, "scheduler", "")) {
    const std::string p = "scheduler.";
    reject_unknown(source, *sc, p, {"threads", "policy"});
    read_int(source, *sc, p, "threads", cfg.scheduler.threads, 0, 1024);
    read_string(source, *sc, p, "policy", cfg.scheduler.policy);
    if (cfg.scheduler.policy != "sharing" && cfg.scheduler.policy != "stealing")
      throw config_error(where(source, *sc->get("policy"), p + "policy")
                         + ": expected \"sharing\" or \"stealing\", got \""
                         + cfg.scheduler.policy + "\"");
  }
  if (auto qs = sub_table(source, root, "queues", "")) {
    for (auto&& [key, value] : *qs) {
      std::string name{key.str()};
      std::string p = "queues." + name + ".";
      if (!value.is_table())
        throw config_error(where(source, value, "queues." + name)
                           + ": expected a table ([queues." + name + "])");
      check_name(source, value, "queues." + name, name, "queue");
      queue_config qc;
      qc.name = name;
      if (auto db = value.as_table()->get("database")) {
        auto text = db->value<std::string>();
        if (!db->is_string() || !text || text->empty())
          throw config_error(where(source, *db, p + "database")
                             + ": expected the name of a [databases.NAME] "
                               "section (or \"default\")");
        if (*text != defaults::database_name)
          cfg.queue_databases[name] = *text;
      }
      read_queue(source, *value.as_table(), p, qc, true);
      cfg.queues.push_back(std::move(qc));
    }
  }
  if (auto ks = sub_table(source, root, "kinds", ""))
    read_kinds(source, *ks, cfg);
  if (auto ps = sub_table(source, root, "periodic", ""))
    read_periodic(source, *ps, cfg);
  if (auto h = sub_table(source, root, "http", "")) {
    reject_unknown(source, *h, "http.",
                   {"listen", "dashboard", "token", "token_env",
                    "allowed_hosts", "read_only", "protect_reads"});
    read_string(source, *h, "http.", "listen", cfg.http.listen);
    read_bool(source, *h, "http.", "dashboard", cfg.http.dashboard);
    read_string(source, *h, "http.", "token", cfg.http.token);
    read_string(source, *h, "http.", "token_env", cfg.http.token_env);
    read_string_array(source, *h, "http.", "allowed_hosts",
                      cfg.http.allowed_hosts);
    read_bool(source, *h, "http.", "read_only", cfg.http.read_only);
    read_bool(source, *h, "http.", "protect_reads", cfg.http.protect_reads);
    if (!cfg.http.listen.empty()) {
      try {
        cfg.http.port();
      } catch (const config_error& e) {
        throw config_error(where(source, at(*h, "listen"), "http.listen")
                           + ": " + e.what());
      }
    }
  }
  if (auto m = sub_table(source, root, "metrics", "")) {
    reject_unknown(source, *m, "metrics.",
                   {"queue_stats_interval", "max_metric_queues"});
    read_duration(source, *m, "metrics.", "queue_stats_interval",
                  cfg.metrics.queue_stats_interval);
    read_int(source, *m, "metrics.", "max_metric_queues",
             cfg.metrics.max_metric_queues, 0, 100000);
  }
  if (auto l = sub_table(source, root, "log", "")) {
    reject_unknown(source, *l, "log.", {"format"});
    read_string(source, *l, "log.", "format", cfg.log.format);
    if (cfg.log.format != "text" && cfg.log.format != "json")
      throw config_error(where(source, at(*l, "format"), "log.format")
                         + ": expected \"text\" or \"json\", got \""
                         + cfg.log.format + "\"");
  }
  // validate()'s messages start with the key they are about: point at its
  // line when the file sets it.
  validate_at(cfg, source, [&](const std::string& key) {
    return std::make_pair(key, find_key(root, key));
  });
  return cfg;
}

/// A [nodes.NAME] section over the top level's configuration.
node_config read_node(const cluster_config& cluster, const toml::table& root,
                      const std::string& name, const toml::node& value,
                      const std::string& source) {
  const std::string p = "nodes." + name + ".";
  if (!value.is_table())
    throw config_error(where(source, value, "nodes." + name)
                       + ": expected a table ([nodes." + name + "])");
  auto& t = *value.as_table();
  node_config n;
  n.name = name;
  n.where = source + ":" + std::to_string(t.source().begin.line);
  n.config = cluster.defaults;
  auto known = worker_keys();
  known.erase("node"); // the section's name is the node's name
  known.insert("queues");
  reject_unknown(source, t, p, known);
  read_worker(source, t, p, n.config.worker);
  n.config.worker.node = name;
  // The queues it serves: a list of names, or a table of per-node queue
  // settings whose keys are the names. A queue the top level does not
  // define runs with the defaults.
  auto base = [&](const std::string& queue) {
    for (auto& q : cluster.defaults.queues)
      if (q.name == queue)
        return q;
    queue_config q;
    q.name = queue;
    return q;
  };
  if (auto qs = t.get("queues")) {
    std::vector<queue_config> served;
    std::set<std::string> seen;
    if (auto list = qs->as_array()) {
      for (auto& item : *list) {
        auto queue = item.value<std::string>();
        if (!item.is_string() || !queue || queue->empty())
          throw config_error(where(source, item, p + "queues")
                             + ": expected queue names (strings)");
        check_name(source, item, p + "queues", *queue, "queue");
        if (!seen.insert(*queue).second)
          throw config_error(where(source, item, p + "queues") + ": queue '"
                             + *queue + "' is listed twice");
        served.push_back(base(*queue));
      }
    } else if (auto table = qs->as_table()) {
      for (auto&& [key, settings] : *table) {
        std::string queue{key.str()};
        check_name(source, settings, p + "queues." + queue, queue, "queue");
        if (!settings.is_table())
          throw config_error(where(source, settings, p + "queues." + queue)
                             + ": expected a table ([" + p + "queues." + queue
                             + "])");
        auto qc = base(queue);
        read_queue(source, *settings.as_table(), p + "queues." + queue + ".",
                   qc, false);
        served.push_back(std::move(qc));
      }
    } else {
      throw config_error(where(source, *qs, p + "queues")
                         + ": expected a list of queue names or [" + p
                         + "queues.NAME] tables");
    }
    if (served.empty())
      throw config_error(where(source, *qs, p + "queues")
                         + ": a node serves at least one queue");
    n.config.queues = std::move(served);
  }
  // Cross-key checks point at the node's key when it sets it, else at the
  // top level's.
  validate_at(n.config, source, [&](const std::string& key) {
    std::string own;
    if (key.rfind("worker.", 0) == 0)
      own = p + key.substr(7);
    else if (key.rfind("queues.", 0) == 0)
      own = p + key;
    if (!own.empty())
      if (auto node = find_key(root, own))
        return std::make_pair(own, node);
    if (auto node = find_key(root, key))
      return std::make_pair(key, node);
    // Set by neither (a check across keys the node sets only some of):
    // the node's section.
    return std::make_pair("nodes." + name,
                          static_cast<const toml::node*>(&t));
  });
  return n;
}

toml::table parse_toml(const std::string& toml_text,
                       const std::string& source) {
  try {
    return toml::parse(toml_text, source);
  } catch (const toml::parse_error& e) {
    std::ostringstream out;
    out << source << ":" << e.source().begin.line << ":"
        << e.source().begin.column << ": invalid TOML: " << e.description();
    throw config_error(out.str());
  }
}

std::string read_file_bounded(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw config_error(path + ": cannot open the configuration file");
  // Read at most the limit and one byte more: a device such as /dev/zero,
  // or a file given by mistake, must not fill the memory.
  std::string text(defaults::max_config_bytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > defaults::max_config_bytes)
    throw config_error(path + ": the configuration file is larger than "
                       + std::to_string(defaults::max_config_bytes / 1024)
                       + " KiB; is it the right file?");
  return text;
}

} // namespace

cluster_config parse_cluster(const std::string& toml_text,
                             const std::string& source) {
  auto root = parse_toml(toml_text, source);
  cluster_config out;
  out.source = source;
  out.defaults = read_top_level(root, source);
  if (auto w = root.get_as<toml::table>("worker"))
    if (auto node = w->get("node"); node && node->is_string())
      out.named_node = *node->value<std::string>();
  if (auto c = sub_table(source, root, "cluster", "")) {
    reject_unknown(source, *c, "cluster.", {"name"});
    read_string(source, *c, "cluster.", "name", out.name);
  }
  if (auto ns = sub_table(source, root, "nodes", "")) {
    for (auto&& [key, value] : *ns)
      out.nodes.push_back(
        read_node(out, root, std::string{key.str()}, value, source));
    std::sort(out.nodes.begin(), out.nodes.end(),
              [](const node_config& a, const node_config& b) {
                return a.name < b.name;
              });
    // A periodic job goes to a queue some node serves, or nothing in the
    // cluster would ever run it.
    for (auto& pc : out.defaults.periodic) {
      bool served = false;
      for (auto& n : out.nodes)
        for (auto& q : n.config.queues)
          served = served || q.name == pc.queue;
      if (served)
        continue;
      std::string key = "periodic." + pc.name + ".queue";
      auto node = find_key(root, key);
      if (!node) {
        key = "periodic." + pc.name;
        node = find_key(root, key);
      }
      std::string names;
      for (auto& n : out.nodes)
        names += (names.empty() ? "" : ", ") + n.name;
      throw config_error(where(source, *node, key) + ": queue '" + pc.queue
                         + "' is served by none of the nodes (" + names
                         + "): its periodic jobs would never run");
    }
  }
  return out;
}

cluster_config load_cluster(const std::string& path) {
  return parse_cluster(read_file_bounded(path), path);
}

runtime_config parse_config(const std::string& toml_text,
                            const std::string& source) {
  return parse_cluster(toml_text, source).defaults;
}

std::string local_host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0')
    return defaults::node;
  return buf;
}

runtime_config select_node(const cluster_config& cluster,
                           const std::string& requested) {
  if (cluster.nodes.empty()) {
    auto cfg = cluster.defaults;
    if (!requested.empty())
      cfg.worker.node = requested;
    return cfg;
  }
  auto name = !requested.empty()          ? requested
              : !cluster.named_node.empty() ? cluster.named_node
                                            : local_host_name();
  for (auto& n : cluster.nodes)
    if (n.name == name)
      return n.config;
  std::string names;
  for (auto& n : cluster.nodes)
    names += (names.empty() ? "" : ", ") + n.name;
  std::string how = !requested.empty() ? "--node"
                    : !cluster.named_node.empty()
                      ? "[worker] node"
                      : "the host name (no --node, no [worker] node)";
  throw config_error(cluster.source + ": node '" + name + "' (from " + how
                     + ") is not defined in this cluster file; its nodes are: "
                     + names + " (pass --node NAME)");
}

runtime_config load_config(const std::string& path) {
  return parse_config(read_file_bounded(path), path);
}

runtime_config resolve_config(const config_sources& sources) {
  runtime_config cfg;
  if (!sources.file.empty()) {
    auto cluster = load_cluster(sources.file);
    cfg = sources.select_node || !sources.node.empty()
            ? select_node(cluster, sources.node)
            : cluster.defaults;
  } else {
    cfg.validate();
    if (!sources.node.empty())
      cfg.worker.node = sources.node;
  }
  if (!sources.database_url.empty())
    cfg.database.url = sources.database_url;
  else if (auto env = std::getenv("DATABASE_URL"); env && *env)
    cfg.database.url = env;
  if (cfg.database.url.empty())
    throw config_error("no database URL: pass --database-url, set "
                       "DATABASE_URL, or set url in the [database] section "
                       "of the config file");
  // The default URL came in only now: check it against the others.
  validate_databases(cfg);
  return cfg;
}

} // namespace aw
