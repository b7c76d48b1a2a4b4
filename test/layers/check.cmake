# cmake -DBUILD_DIR=... -DTARGET=... -DHEADER=... -P check.cmake
# Builds TARGET (a file that includes HEADER from a layer above its own) and
# passes only if the build fails because HEADER cannot be found: the layer
# boundary, not some other error.
execute_process(COMMAND "${CMAKE_COMMAND}" --build "${BUILD_DIR}" --target "${TARGET}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "${TARGET} compiled: ${HEADER} is reachable from a lower layer")
endif()
string(FIND "${out}${err}" "${HEADER}: No such file or directory" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${TARGET} failed for another reason than the missing ${HEADER}:\n${out}${err}")
endif()
message(STATUS "${TARGET}: ${HEADER} is out of reach, as it should be")
