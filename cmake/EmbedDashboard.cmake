# Turns the dashboard's page, script and style (app/dashboard/) and the
# chart library (Debian's libjs-chart.js, found at configure time) into a
# generated C++ source, so the binary serves the dashboard with no files
# and no network at run time (no CDN).
# Invoked in script mode:
#   cmake -DSRC_DIR=... -DCHARTJS=...|"" -DOUT=... -P EmbedDashboard.cmake
# url|file|type (every one is UTF-8 text; no ';' here: it splits lists)
set(_assets
  "/|index.html|text/html"
  "/app.js|app.js|text/javascript"
  "/app.css|app.css|text/css")
set(_delim "aw_asset")
set(_defs "")
set(_table "")
set(_n 0)
macro(_embed url file type)
  file(READ "${file}" _body)
  string(FIND "${_body}" ")${_delim}\"" _clash)
  if(NOT _clash EQUAL -1)
    message(FATAL_ERROR "${file} contains the raw string delimiter )${_delim}\"")
  endif()
  string(APPEND _defs "constexpr char asset_${_n}[] = R\"${_delim}(${_body})${_delim}\";\n")
  string(APPEND _table "    {\"${url}\", \"${type}; charset=utf-8\", {asset_${_n}, sizeof asset_${_n} - 1}},\n")
  math(EXPR _n "${_n} + 1")
endmacro()
foreach(_a IN LISTS _assets)
  string(REPLACE "|" ";" _parts "${_a}")
  list(GET _parts 0 _url)
  list(GET _parts 1 _file)
  list(GET _parts 2 _type)
  _embed("${_url}" "${SRC_DIR}/${_file}" "${_type}")
endforeach()
if(CHARTJS AND EXISTS "${CHARTJS}")
  _embed("/vendor/chart.min.js" "${CHARTJS}" "text/javascript")
  set(_charts "true")
else()
  # Without the library the page draws no chart and says why.
  string(APPEND _defs "constexpr char asset_${_n}[] = \"/* Chart.js was not found when actor-worker was built (Debian: libjs-chart.js) */\";\n")
  string(APPEND _table "    {\"/vendor/chart.min.js\", \"text/javascript; charset=utf-8\", {asset_${_n}, sizeof asset_${_n} - 1}},\n")
  set(_charts "false")
endif()
file(WRITE "${OUT}.tmp"
"// Generated from app/dashboard/ (and Chart.js) by cmake/EmbedDashboard.cmake. Do not edit.
#include \"actor_worker/app/dashboard_assets.hpp\"
namespace aw {
namespace {
${_defs}
const dashboard_asset assets[] = {
${_table}};
} // namespace

const dashboard_asset* find_dashboard_asset(std::string_view path) {
  for (const auto& a : assets)
    if (path == a.path)
      return &a;
  return nullptr;
}

bool dashboard_has_charts() {
  return ${_charts};
}
} // namespace aw
")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUT}.tmp" "${OUT}")
