# Installs the build in BUILD_DIR to a temporary prefix, builds the consumer project against it
# and runs the example, which exits 0 only if it behaved as its comments say.
# Inputs: SOURCE_DIR, BUILD_DIR, WORK_DIR, GENERATOR.
file(REMOVE_RECURSE "${WORK_DIR}")

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "${what}:\n${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc})")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

run("install" ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${WORK_DIR}/prefix")
run("configure consumer" ${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/install/consumer"
    -B "${WORK_DIR}/build" -G "${GENERATOR}" -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix
    -DEXAMPLE=${SOURCE_DIR}/examples/embedding.cpp)
run("build consumer" ${CMAKE_COMMAND} --build "${WORK_DIR}/build")
run("run example" "${WORK_DIR}/build/embedding")
if(NOT last_output MATCHES "state=cancelled reason=cancelled_while_running cause=deadline")
  message(FATAL_ERROR "unexpected output: ${last_output}")
endif()
