#include "actor_worker/app/toml_kinds.hpp"

#include <memory>

#include "actor_worker/app/command_handler.hpp"
#include "actor_worker/app/http_handler.hpp"
#include "actor_worker/app/registry.hpp"

namespace aw {

void refuse_registered_names(const registry& reg,
                             const std::vector<kind_config>& kinds) {
  for (auto& k : kinds)
    if (reg.contains(k.name))
      throw config_error(k.where + ": key 'kinds." + k.name + "': '" + k.name
                         + "' is a built-in kind of actor-worker; give the "
                           "configured kind another name");
}

void register_toml_kinds(registry& reg, const std::vector<kind_config>& kinds) {
  refuse_registered_names(reg, kinds);
  std::shared_ptr<command_runner> commands;
  std::shared_ptr<http_client> http;
  for (auto& k : kinds) {
    if (k.command) {
      if (!commands)
        commands = std::make_shared<command_runner>();
      reg.add_raw_async(k.name, command_handler(commands, *k.command));
    } else if (k.http) {
      auto cfg = *k.http;
      resolve_header_variables(cfg);
      if (!http)
        http = std::make_shared<http_client>();
      reg.add_raw_async(k.name, http_handler(http, std::move(cfg)));
    }
    if (k.callback_timeout)
      reg.register_callback_on_start(k.name, *k.callback_timeout);
  }
}

} // namespace aw
