#include "actor_worker/app/periodic_status.hpp"

#include <algorithm>

namespace aw {

namespace {

using json = nlohmann::json;

json tick_json(int64_t seconds) {
  return format_utc(cron_time{std::chrono::seconds{seconds}});
}

/// Adds a row's last run to `out` (null keys without a row).
void last_run(json& out, const periodic_row* row) {
  out["last_tick"] = row ? tick_json(row->last_tick) : json(nullptr);
  out["last_job_id"] = row && row->last_job_id > 0 ? json(row->last_job_id)
                                                   : json(nullptr);
  out["last_enqueued_at"] = row ? json(row->enqueued_at) : json(nullptr);
}

} // namespace

json periodic_status(const std::vector<periodic_config>& configured,
                     const std::vector<periodic_row>& rows,
                     std::chrono::system_clock::time_point now) {
  json out = json::array();
  for (auto& pc : configured) {
    auto row = std::find_if(rows.begin(), rows.end(),
                            [&](const periodic_row& r) { return r.name == pc.name; });
    const periodic_row* r = row == rows.end() ? nullptr : &*row;
    json s{{"name", pc.name},
           {"configured", true},
           {"cron", pc.cron},
           {"timezone", pc.timezone},
           {"kind", pc.kind},
           {"queue", pc.queue},
           {"priority", pc.priority},
           {"catch_up", to_string(pc.catch_up)}};
    last_run(s, r);
    s["changed"] = r != nullptr && r->spec != pc.spec();
    json next = nullptr;
    try {
      if (auto n = pc.schedule().next_after(now))
        next = format_utc(*n);
    } catch (const std::exception&) {
      // Validated by the loader; a schedule that cannot be parsed has no
      // next tick to show.
    }
    s["next_tick"] = std::move(next);
    out.push_back(std::move(s));
  }
  for (auto& r : rows) {
    bool known = std::any_of(configured.begin(), configured.end(),
                             [&](const periodic_config& pc) { return pc.name == r.name; });
    if (known)
      continue;
    // The spec is "CRON @ ZONE" (periodic_config::spec()).
    auto split = r.spec.rfind(" @ ");
    json s{{"name", r.name},
           {"configured", false},
           {"cron", r.spec.substr(0, split)},
           {"timezone", split == std::string::npos ? json(nullptr)
                                                   : json(r.spec.substr(split + 3))},
           {"kind", nullptr},
           {"queue", nullptr},
           {"priority", nullptr},
           {"catch_up", nullptr}};
    last_run(s, &r);
    s["changed"] = false;
    s["next_tick"] = nullptr;
    out.push_back(std::move(s));
  }
  return out;
}

} // namespace aw
