// `actor-worker migrate`.

#include "actor_worker/app/cli/cli.hpp"

#include <spdlog/spdlog.h>

#include "actor_worker/app/runtime.hpp"

namespace aw::cli {

int migrate_schema(const runtime_config& cfg) {
  auto report = aw::migrate(cfg);
  if (report.applied.empty())
    spdlog::info("schema is up to date (version {})", report.to_version);
  for (auto& name : report.applied)
    spdlog::info("applied migration {}", name);
  if (!report.applied.empty())
    spdlog::info("schema migrated from version {} to {}", report.from_version,
                 report.to_version);
  return exit_ok;
}

} // namespace aw::cli
