#pragma once
// `[log] format`: how the default spdlog logger renders each line.
//
//   text  "[2026-12-01 10:07:08.596] [actor-worker] [info] job 42 (kind
//         'email', queue 'default', attempt 1) completed in 12 ms"
//   json  {"time":"2026-12-01T10:07:08.596Z","level":"info",
//          "message":"job 42 (...) completed in 12 ms","job_id":42,
//          "kind":"email","queue":"default","attempt":1}
//
// One line per event in both: control characters in a message are escaped
// (\n as "\n" in text, as JSON escapes in json), so a value can never
// start a forged line. The job fields appear where the line is about one
// job (actors/job_log.hpp). Invalid UTF-8 is replaced in JSON.

#include <memory>

#include <spdlog/formatter.h>

#include "actor_worker/config/config.hpp"

namespace aw {

/// The formatter of `format` ("text" or "json"); throws config_error for
/// anything else.
std::unique_ptr<spdlog::formatter> make_log_formatter(const std::string& format);

/// Gives the default logger's sinks the formatter of `cfg.format`. The
/// binary calls it once its configuration is loaded; an application
/// embedding the runtime may call it for its own default logger, or leave
/// its logging as it is.
void configure_log_format(const log_config& cfg);

} // namespace aw
