#pragma once
// Helpers of the configuration tests.

#include <string>

#include "actor_worker/config/config.hpp"

namespace aw_test {

/// The message of the config_error that reading `text` as the file
/// "worker.toml" (or `source`) throws; "" if none.
inline std::string config_error_of(const std::string& text,
                                   const std::string& source = "worker.toml") {
  try {
    aw::parse_cluster(text, source);
  } catch (const aw::config_error& e) {
    return e.what();
  }
  return "";
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

} // namespace aw_test
