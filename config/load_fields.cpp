// The loader's typed readers of TOML keys and where their complaints point
// (declared, with their contracts, in config/internal/load_parts.hpp).

#include <map>
#include <set>
#include <sstream>

#include "actor_worker/config/internal/load_parts.hpp"

namespace aw {

namespace config_detail {

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

const toml::node& at(const toml::table& t, const char* key) {
  if (auto node = t.get(key))
    return *node;
  return t;
}

void index_keys(const toml::table& t, const std::string& prefix,
                std::map<std::string, const toml::node*>& out) {
  for (auto&& [key, value] : t) {
    auto name = prefix + std::string{key.str()};
    out[name] = &value;
    if (value.is_table())
      index_keys(*value.as_table(), name + ".", out);
  }
}

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

const toml::node* find_key(const toml::table& root, const std::string& key) {
  std::map<std::string, const toml::node*> keys;
  index_keys(root, "", keys);
  auto i = keys.find(key);
  return i == keys.end() ? nullptr : i->second;
}

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

} // namespace config_detail

} // namespace aw
