# Builds the Debian package from the build in BUILD_DIR with CPack (into WORK_DIR, not the build
# folder), unpacks it with dpkg-deb and checks what an operator gets: the files, the conffile,
# the computed Depends, and that the packaged sandglassd accepts the packaged config.
# Inputs: SOURCE_DIR, BUILD_DIR, WORK_DIR, CPACK, VERSION.
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "${what}:\n${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc})")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

run("cpack" "${CPACK}" -G DEB --config "${BUILD_DIR}/CPackConfig.cmake" -B "${WORK_DIR}/out")
run("architecture" dpkg --print-architecture)
string(STRIP "${last_output}" arch)
set(deb "${WORK_DIR}/out/sandglassd_${VERSION}_${arch}.deb")
if(NOT EXISTS "${deb}")
  file(GLOB debs "${WORK_DIR}/out/*.deb")
  message(FATAL_ERROR "no ${deb}; cpack wrote: ${debs}")
endif()

set(root "${WORK_DIR}/root")
run("extract" dpkg-deb -x "${deb}" "${root}")
run("extract control" dpkg-deb -e "${deb}" "${WORK_DIR}/control")

# The files, and nothing for developers (headers, static libraries, the CMake package).
foreach(path usr/bin/sandglassd usr/bin/sandglass etc/sandglass/sandglassd.toml
             usr/lib/systemd/system/sandglassd.service usr/share/sandglass/sandglassd.toml
             usr/share/sandglass/prometheus/prometheus.yml
             usr/share/sandglass/prometheus/sandglass-rules.yml)
  if(NOT EXISTS "${root}/${path}")
    message(FATAL_ERROR "not in the package: /${path}")
  endif()
endforeach()
file(GLOB_RECURSE developer_files "${root}/usr/include/*" "${root}/usr/lib/*.a" "${root}/usr/lib/*/*.a")
if(developer_files)
  message(FATAL_ERROR "developer files in the package: ${developer_files}")
endif()
file(READ "${SOURCE_DIR}/daemon/config/sandglassd.toml" shipped)
file(READ "${root}/etc/sandglass/sandglassd.toml" packaged)
if(NOT packaged STREQUAL shipped)
  message(FATAL_ERROR "/etc/sandglass/sandglassd.toml differs from daemon/config/sandglassd.toml")
endif()

# The unit starts the packaged binary.
file(STRINGS "${root}/usr/lib/systemd/system/sandglassd.service" exec_start REGEX "^ExecStart=")
if(NOT exec_start STREQUAL "ExecStart=/usr/bin/sandglassd --config /etc/sandglass/sandglassd.toml --auth-token-file %d/auth-token")
  message(FATAL_ERROR "unexpected unit: ${exec_start}")
endif()

# The config is a conffile (dpkg keeps an operator's edits on upgrade), and the only one.
file(READ "${WORK_DIR}/control/conffiles" conffiles)
if(NOT conffiles STREQUAL "/etc/sandglass/sandglassd.toml\n")
  message(FATAL_ERROR "unexpected conffiles: '${conffiles}'")
endif()

# Depends comes from dpkg-shlibdeps: at least the C library and libpq (the sql kind).
run("Depends" dpkg-deb -f "${deb}" Depends)
string(STRIP "${last_output}" depends)
if(NOT depends MATCHES "(^|, )libc6 \\(>= " OR NOT depends MATCHES "(^|, )libpq5 ")
  message(FATAL_ERROR "Depends lacks libc6 or libpq5: '${depends}'")
endif()

run("check the packaged config" "${root}/usr/bin/sandglassd" --check-config
    --config "${root}/etc/sandglass/sandglassd.toml")
if(NOT last_output STREQUAL "${root}/etc/sandglass/sandglassd.toml: configuration is valid\n")
  message(FATAL_ERROR "unexpected --check-config output: '${last_output}'")
endif()

# The packaged client runs, and says how a script tells outcomes apart.
run("the packaged client's help" "${root}/usr/bin/sandglass" --help)
if(NOT last_output MATCHES "Exit codes:")
  message(FATAL_ERROR "unexpected sandglass --help output: '${last_output}'")
endif()

# The manual pages name every flag and command the binaries' help lists (the pages are written
# by hand in deploy/man/; this keeps them true).
function(expect_page_names page help_output)
  file(READ "${page}" roff)
  string(REPLACE "\\-" "-" roff "${roff}")
  string(REGEX MATCHALL "--[a-z][a-z-]*" flags "${help_output}")
  list(REMOVE_DUPLICATES flags)
  foreach(flag ${flags})
    string(FIND "${roff}" "${flag}" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "${page} does not name ${flag}, which --help lists")
    endif()
  endforeach()
endfunction()
foreach(page usr/share/man/man8/sandglassd.8.gz usr/share/man/man1/sandglass.1.gz)
  if(NOT EXISTS "${root}/${page}")
    message(FATAL_ERROR "not in the package: /${page}")
  endif()
  string(REGEX REPLACE "\\.gz$" "" unpacked "${WORK_DIR}/${page}")
  get_filename_component(unpacked_dir "${unpacked}" DIRECTORY)
  file(MAKE_DIRECTORY "${unpacked_dir}")
  run("unpack ${page}" gzip -dc "${root}/${page}")
  file(WRITE "${unpacked}" "${last_output}")
endforeach()
run("sandglassd --help" "${root}/usr/bin/sandglassd" --help)
expect_page_names("${WORK_DIR}/usr/share/man/man8/sandglassd.8" "${last_output}")
run("sandglass --help" "${root}/usr/bin/sandglass" --help)
set(client_help "${last_output}")
string(REGEX MATCH "Subcommands:\n(.*)\n\nExit codes:" _ "${client_help}")
string(REGEX MATCHALL "\n  [a-z-]+" commands "\n${CMAKE_MATCH_1}")
foreach(command ${commands})
  string(STRIP "${command}" command)
  run("sandglass ${command} --help" "${root}/usr/bin/sandglass" ${command} --help)
  string(APPEND client_help "${last_output}")
  file(READ "${WORK_DIR}/usr/share/man/man1/sandglass.1" roff)
  string(REPLACE "\\-" "-" roff "${roff}")
  if(NOT roff MATCHES "\n\\.B[I]? \"?${command}[ \n\"]")
    message(FATAL_ERROR "sandglass.1 has no entry for the command ${command}")
  endif()
endforeach()
expect_page_names("${WORK_DIR}/usr/share/man/man1/sandglass.1" "${client_help}")

# Lintian, Debian's package checker, finds no error and no warning (its informational notes are
# printed above by run()).
run("lintian" lintian --fail-on error,warning "${deb}")

# The changelog's newest entry is this version.
run("changelog" gzip -dc "${root}/usr/share/doc/sandglassd/changelog.gz")
if(NOT last_output MATCHES "^sandglassd \\(${VERSION}\\) ")
  message(FATAL_ERROR "the changelog's first entry is not version ${VERSION}: '${last_output}'")
endif()
