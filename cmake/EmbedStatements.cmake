# Turns storage/sql/NAME.sql into a generated header of string constants,
# `aw::storage::sql::NAME`, so every statement lives in a .sql file of its
# own (readable, and checkable with psql) and the binary needs no files at
# run time. Private to aw_storage: nothing installed includes it.
# Invoked in script mode: cmake -DSRC_DIR=... -DOUT=... -P EmbedStatements.cmake
file(GLOB _files "${SRC_DIR}/*.sql")
list(SORT _files)
set(_body "")
foreach(_f IN LISTS _files)
  get_filename_component(_name "${_f}" NAME_WE)
  file(READ "${_f}" _sql)
  string(APPEND _body "/// storage/sql/${_name}.sql\ninline constexpr const char* ${_name} = R\"aw_sql(${_sql})aw_sql\";\n\n")
endforeach()
file(WRITE "${OUT}.tmp"
"// Generated from storage/sql/*.sql by cmake/EmbedStatements.cmake. Do not edit.
#pragma once
namespace aw::storage::sql {

${_body}} // namespace aw::storage::sql
")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUT}.tmp" "${OUT}")
