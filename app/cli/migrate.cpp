// `actor-worker migrate`.

#include "actor_worker/app/cli/cli.hpp"

#include <spdlog/spdlog.h>

#include "actor_worker/app/runtime.hpp"

namespace aw::cli {

int migrate_schema(const runtime_config& cfg, const std::string& database) {
  auto report = [&](const std::string& name,
                    const storage::migrate_report& r) {
    // Name the database only when the file has several.
    std::string of = cfg.sharded() ? "database '" + name + "': " : "";
    if (r.applied.empty())
      spdlog::info("{}schema is up to date (version {})", of, r.to_version);
    for (auto& migration : r.applied)
      spdlog::info("{}applied migration {}", of, migration);
    if (!r.applied.empty())
      spdlog::info("{}schema migrated from version {} to {}", of,
                   r.from_version, r.to_version);
  };
  if (!database.empty()) {
    auto one = cfg.routed(database, "");
    report(database, aw::migrate(one));
    return exit_ok;
  }
  aw::migrate_all(cfg, [&](const database_migrate_report& r) {
    report(r.database, r.report);
  });
  return exit_ok;
}

} // namespace aw::cli
