# Turns migrations/NNN_name.sql (DDL) and storage/sql/functions/NAME.sql
# (the function NAME, and any helpers only it calls) into a generated C++ source, so the binary
# carries its schema and `actor-worker migrate` needs no files at run time.
# Invoked in script mode:
#   cmake -DSRC_DIR=... -DFUNCTIONS_DIR=... -DOUT=... -P EmbedMigrations.cmake
file(GLOB _files "${SRC_DIR}/[0-9][0-9][0-9]_*.sql")
list(SORT _files)
set(_body "")
foreach(_f IN LISTS _files)
  get_filename_component(_name "${_f}" NAME_WE)
  string(SUBSTRING "${_name}" 0 3 _ver)
  math(EXPR _ver "${_ver}")  # strip leading zeros
  file(READ "${_f}" _sql)
  string(APPEND _body "  {${_ver}, \"${_name}\", R\"aw_sql(${_sql})aw_sql\"},\n")
endforeach()
file(GLOB _functions "${FUNCTIONS_DIR}/*.sql")
list(SORT _functions)
set(_fbody "")
foreach(_f IN LISTS _functions)
  get_filename_component(_name "${_f}" NAME_WE)
  file(READ "${_f}" _sql)
  # The functions the file defines: NAME first, then its helpers.
  string(REGEX MATCHALL "\nCREATE OR REPLACE FUNCTION [a-z0-9_]+" _defs "\n${_sql}")
  set(_names "\"${_name}\"")
  foreach(_d IN LISTS _defs)
    string(REGEX REPLACE ".*FUNCTION " "" _d "${_d}")
    if(NOT _d STREQUAL _name)
      string(APPEND _names ", \"${_d}\"")
    endif()
  endforeach()
  string(APPEND _fbody "  {\"${_name}\", {${_names}}, R\"aw_sql(${_sql})aw_sql\"},\n")
endforeach()
file(WRITE "${OUT}.tmp"
"// Generated from migrations/*.sql and storage/sql/functions/*.sql by
// cmake/EmbedMigrations.cmake. Do not edit.
#include \"actor_worker/storage/migrations.hpp\"
namespace aw::storage {
const std::vector<migration>& embedded_migrations() {
  static const std::vector<migration> all = {
${_body}  };
  return all;
}
const std::vector<sql_function>& embedded_functions() {
  static const std::vector<sql_function> all = {
${_fbody}  };
  return all;
}
} // namespace aw::storage
")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUT}.tmp" "${OUT}")
