#pragma once
// The dashboard's files, compiled into the binary at build time
// (cmake/EmbedDashboard.cmake): the page, its script and style
// (app/dashboard/), and Chart.js from Debian's libjs-chart.js.

#include <string_view>

namespace aw {

/// A file of the dashboard's page, compiled into the binary.
struct dashboard_asset {
  /// The URL path: "/", "/app.js", "/app.css", "/vendor/chart.min.js".
  const char* path;
  /// Its Content-Type header.
  const char* content_type;
  /// Its bytes.
  std::string_view body;
};

/// The asset served at `path`, or nullptr.
const dashboard_asset* find_dashboard_asset(std::string_view path);

/// True when Chart.js was found at build time (otherwise the page shows
/// the throughput as numbers only).
bool dashboard_has_charts();

} // namespace aw
