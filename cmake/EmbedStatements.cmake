# Turns the statements of storage/sql/*.sql into a generated header of
# string constants, `aw::storage::sql::NAME`, so every statement lives in a
# .sql file (readable, and checkable with psql) and the binary needs no
# files at run time. Private to aw_storage: nothing installed includes it.
# A file holds the statements of one concept, each under a line
# `-- name: NAME` (as River's and sqlc's query files do); the text before
# the first such line describes the file and is not a statement.
# Invoked in script mode: cmake -DSRC_DIR=... -DOUT=... -P EmbedStatements.cmake
file(GLOB _files "${SRC_DIR}/*.sql")
list(SORT _files)
set(_body "")
set(_marker "\n-- name: ")
foreach(_f IN LISTS _files)
  get_filename_component(_file "${_f}" NAME_WE)
  file(READ "${_f}" _text)
  set(_rest "\n${_text}")
  string(FIND "${_rest}" "${_marker}" _at)
  if(_at EQUAL -1)
    message(FATAL_ERROR "storage/sql/${_file}.sql has no `-- name: NAME` line")
  endif()
  while(NOT _at EQUAL -1)
    # _rest from the marker: "\n-- name: NAME\n<statement>..."
    math(EXPR _from "${_at} + 10")
    string(SUBSTRING "${_rest}" ${_from} -1 _rest)
    string(FIND "${_rest}" "\n" _eol)
    string(SUBSTRING "${_rest}" 0 ${_eol} _name)
    string(STRIP "${_name}" _name)
    math(EXPR _eol "${_eol} + 1")
    string(SUBSTRING "${_rest}" ${_eol} -1 _rest)
    string(FIND "${_rest}" "${_marker}" _at)
    if(_at EQUAL -1)
      set(_sql "${_rest}")
    else()
      string(SUBSTRING "${_rest}" 0 ${_at} _sql)
    endif()
    string(STRIP "${_sql}" _sql)
    string(APPEND _body "/// storage/sql/${_file}.sql: ${_name}\ninline constexpr const char* ${_name} = R\"aw_sql(${_sql}\n)aw_sql\";\n\n")
  endwhile()
endforeach()
file(WRITE "${OUT}.tmp"
"// Generated from storage/sql/*.sql by cmake/EmbedStatements.cmake. Do not edit.
#pragma once
namespace aw::storage::sql {

${_body}} // namespace aw::storage::sql
")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUT}.tmp" "${OUT}")
