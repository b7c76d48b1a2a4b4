// [periodic.NAME]: jobs enqueued on a cron schedule.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <sstream>

#include "actor_worker/config/internal/load_parts.hpp"

namespace aw {

namespace config_detail {

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

} // namespace config_detail

const char* to_string(catch_up_policy p) {
  return p == catch_up_policy::none ? "none" : "latest";
}

cron_schedule periodic_config::schedule() const {
  return cron_schedule{cron_expression::parse(cron), timezone};
}

} // namespace aw
