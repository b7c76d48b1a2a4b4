#pragma once
// Reading a /metrics scrape (Prometheus text format) in tests.

#include <sstream>
#include <string>

namespace aw_test {

/// The value of the sample `series` (name{labels} exactly as exported) in
/// `scrape`; -1 when absent.
inline double metric_value(const std::string& scrape,
                           const std::string& series) {
  std::istringstream in{scrape};
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(series + " ", 0) == 0)
      return std::stod(line.substr(series.size() + 1));
  return -1;
}

} // namespace aw_test
