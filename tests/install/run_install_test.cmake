# Installs the build in BUILD_DIR to a temporary prefix, checks what went where, and builds two
# separate CMake projects against it, as an embedder would:
#   consumer/         examples/embedding.cpp and examples/coroutine_service.cpp, linking
#                     sandglass::sandglass; run, each exits 0 only if it behaved as its comments
#                     say;
#   daemon_consumer/  examples/custom_daemon.cpp, linking sandglass::daemon; run on a free port
#                     by run_custom_daemon.sh, which sends it a job of its own kind.
# Inputs: SOURCE_DIR, BUILD_DIR, WORK_DIR, GENERATOR, LAUNCHER (a compiler launcher or empty).
file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "${what}:\n${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc})")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

function(expect_file path)
  if(NOT EXISTS "${prefix}/${path}")
    message(FATAL_ERROR "not installed: ${path}")
  endif()
endfunction()

run("install" ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")

# What an operator gets.
foreach(path bin/sandglassd lib/systemd/system/sandglassd.service share/sandglass/sandglassd.toml
             share/sandglass/prometheus/prometheus.yml share/sandglass/prometheus/sandglass-rules.yml
             include/sandglass/daemon/daemon.hpp lib/cmake/sandglass/sandglassDaemonTargets.cmake)
  expect_file(${path})
endforeach()
file(STRINGS "${prefix}/lib/systemd/system/sandglassd.service" exec_start REGEX "^ExecStart=")
if(NOT exec_start STREQUAL "ExecStart=${prefix}/bin/sandglassd --config /etc/sandglass/sandglassd.toml --auth-token-file %d/auth-token")
  message(FATAL_ERROR "the installed unit does not start the installed binary: ${exec_start}")
endif()
# The Debian package's /etc/sandglass is not part of a plain install.
file(READ "${BUILD_DIR}/install_manifest.txt" manifest)
if(manifest MATCHES "/etc/sandglass")
  message(FATAL_ERROR "a plain install wrote to /etc/sandglass:\n${manifest}")
endif()
run("check the installed config" "${prefix}/bin/sandglassd" --check-config
    --config "${prefix}/share/sandglass/sandglassd.toml")

set(launcher "")
if(LAUNCHER)
  set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()

# The Runtime, embedded.
run("configure consumer" ${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/install/consumer"
    -B "${WORK_DIR}/build" -G "${GENERATOR}" -DCMAKE_PREFIX_PATH=${prefix} ${launcher}
    -DEXAMPLE=${SOURCE_DIR}/examples/embedding.cpp
    -DCOROUTINE_EXAMPLE=${SOURCE_DIR}/examples/coroutine_service.cpp)
run("build consumer" ${CMAKE_COMMAND} --build "${WORK_DIR}/build")
run("run example" "${WORK_DIR}/build/embedding")
if(NOT last_output MATCHES "state=cancelled reason=cancelled_while_running cause=deadline")
  message(FATAL_ERROR "unexpected output: ${last_output}")
endif()
run("run coroutine example" "${WORK_DIR}/build/coroutine_service")
foreach(line "resize  state=completed reason=ok" "export  state=failed reason=deadline_exceeded_before_dispatch"
             "ping    state=rejected reason=budget_too_small"
             "crunch  state=cancelled reason=cancelled_while_running cause=caller")
  string(FIND "${last_output}" "${line}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the coroutine example did not print \"${line}\": ${last_output}")
  endif()
endforeach()

# A daemon of one's own: the built-in kinds plus one more.
run("configure daemon consumer" ${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/install/daemon_consumer"
    -B "${WORK_DIR}/daemon_build" -G "${GENERATOR}" -DCMAKE_PREFIX_PATH=${prefix} ${launcher}
    -DEXAMPLE=${SOURCE_DIR}/examples/custom_daemon.cpp)
run("build daemon consumer" ${CMAKE_COMMAND} --build "${WORK_DIR}/daemon_build")
run("run custom daemon" bash "${SOURCE_DIR}/tests/install/run_custom_daemon.sh"
    "${WORK_DIR}/daemon_build/custom_daemon")
