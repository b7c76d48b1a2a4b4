#pragma once
// Registers the job kinds of a configuration's [kinds.NAME] tables: command
// kinds (app/command_handler.hpp) and HTTP kinds (app/http_handler.hpp),
// both asynchronous handlers. All command kinds share one I/O thread, all
// HTTP kinds another; each is started only when a kind of its type is
// configured, and stops when the registry is destroyed (after the
// runtime: see runtime::stop).

#include <vector>

#include "actor_worker/config/config.hpp"

namespace aw {

class registry;

/// Throws config_error (naming the file, line and key) for the first of
/// `kinds` that `reg` already has: what register_toml_kinds refuses, for
/// `check`, which registers nothing.
void refuse_registered_names(const registry& reg,
                             const std::vector<kind_config>& kinds);

/// Registers `kinds` in `reg`, replacing `${NAME}` in HTTP header values
/// from the environment now (resolve_header_variables). A kind the
/// registry already has (a built-in one, registered first) is a
/// config_error naming its file and line: a configuration cannot silently
/// replace a kind the binary documents; so is an unset variable.
void register_toml_kinds(registry& reg, const std::vector<kind_config>& kinds);

} // namespace aw
