# What `cmake --install build --prefix PREFIX` puts in place (PREFIX defaults to /usr/local):
#
#   bin/sandglassd                               the daemon                      component daemon
#   bin/sandglass                                the command-line client         component daemon
#   lib/systemd/system/sandglassd.service        its unit, ExecStart=PREFIX/bin  component daemon
#   share/sandglass/sandglassd.toml              the default config              component daemon
#   share/sandglass/prometheus/                  scrape config and rules         component daemon
#   share/man/man8/sandglassd.8.gz, man1/...     the manual pages                component daemon
#   include/sandglass/                           the public headers              component development
#   lib/libsandglass_*.a                         the layers and the daemon       component development
#   lib/cmake/sandglass/                         the CMake package               component development
#
# An embedder of the Runtime links sandglass::sandglass, of the daemon sandglass::daemon:
#   find_package(sandglass CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE sandglass::daemon)
# The package config finds the daemon's own dependencies (find_dependency); a consumer of the
# Runtime alone can skip them with find_package(sandglass CONFIG REQUIRED COMPONENTS runtime).
#
# The Debian package (cmake/package.cmake) holds the component daemon plus debian_config (the
# config as a conffile in /etc/sandglass), which a plain `cmake --install` leaves out.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(sandglass_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/sandglass)

# ---- component development: headers, static libraries, the CMake package ---------------------
install(DIRECTORY include/sandglass DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT development)
install(TARGETS sandglass sandglass_runtime sandglass_workers sandglass_queue sandglass_core
        EXPORT sandglassTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT sandglassTargets NAMESPACE sandglass:: DESTINATION ${sandglass_cmake_dir}
        COMPONENT development)
# The daemon library in an export set of its own, loaded only when its dependencies are found.
# A fuzz build links a Boost.JSON of its own making into it and is not for installing.
if(NOT SANDGLASS_FUZZ)
  install(TARGETS sandglass_daemon
          EXPORT sandglassDaemonTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development
          INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(EXPORT sandglassDaemonTargets NAMESPACE sandglass:: DESTINATION ${sandglass_cmake_dir}
          COMPONENT development)
endif()

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/sandglassConfig.cmake.in
  ${PROJECT_BINARY_DIR}/sandglassConfig.cmake
  INSTALL_DESTINATION ${sandglass_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/sandglassConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/sandglassConfig.cmake
              ${PROJECT_BINARY_DIR}/sandglassConfigVersion.cmake
        DESTINATION ${sandglass_cmake_dir} COMPONENT development)

# ---- component daemon: what an operator runs ---------------------------------------------------
install(TARGETS sandglassd sandglass_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT daemon)
install(FILES daemon/config/sandglassd.toml
        DESTINATION ${CMAKE_INSTALL_DATADIR}/sandglass COMPONENT daemon)
install(FILES deploy/prometheus/prometheus.yml deploy/prometheus/sandglass-rules.yml
        DESTINATION ${CMAKE_INSTALL_DATADIR}/sandglass/prometheus COMPONENT daemon)
# The unit in deploy/systemd names /usr/local/bin/sandglassd; the installed one names the binary
# where this install puts it. The prefix is known only when installing (--prefix, or /usr when
# CPack builds the .deb), so the unit is written then (cmake/install_systemd_unit.cmake).
install(CODE "set(SANDGLASS_UNIT_SOURCE \"${PROJECT_SOURCE_DIR}/deploy/systemd/sandglassd.service\")
              set(SANDGLASS_UNIT_WORK_DIR \"${PROJECT_BINARY_DIR}/systemd-unit\")
              set(SANDGLASS_BINDIR \"${CMAKE_INSTALL_BINDIR}\")"
        COMPONENT daemon)
install(SCRIPT cmake/install_systemd_unit.cmake COMPONENT daemon)

# The manual pages, compressed as Debian wants them (gzip -9n: no name or time stamp inside, so
# the same page gives the same bytes). The Debian copyright and changelog go with the package.
set(sandglass_gzipped)
foreach(page deploy/man/sandglassd.8 deploy/man/sandglass.1 cmake/debian/changelog)
  get_filename_component(name ${page} NAME)
  set(gz ${PROJECT_BINARY_DIR}/gzipped/${name}.gz)
  add_custom_command(OUTPUT ${gz}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/gzipped
    COMMAND gzip -9n -c ${PROJECT_SOURCE_DIR}/${page} > ${gz}
    DEPENDS ${PROJECT_SOURCE_DIR}/${page} VERBATIM)
  list(APPEND sandglass_gzipped ${gz})
endforeach()
add_custom_target(sandglass_gzipped_docs ALL DEPENDS ${sandglass_gzipped})
install(FILES ${PROJECT_BINARY_DIR}/gzipped/sandglassd.8.gz
        DESTINATION ${CMAKE_INSTALL_MANDIR}/man8 COMPONENT daemon)
install(FILES ${PROJECT_BINARY_DIR}/gzipped/sandglass.1.gz
        DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT daemon)

# ---- component debian_config: only in the .deb -------------------------------------------------
# An absolute destination: /etc, whatever the prefix. Left out of a full `cmake --install`, so
# installing to a prefix never writes to /etc.
install(FILES daemon/config/sandglassd.toml DESTINATION /etc/sandglass
        COMPONENT debian_config EXCLUDE_FROM_ALL)
# What Debian's policy asks of every package: its copyright and, for a native package, its
# changelog, in /usr/share/doc/PACKAGE.
install(FILES cmake/debian/copyright DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/sandglassd
        COMPONENT debian_config EXCLUDE_FROM_ALL)
install(FILES ${PROJECT_BINARY_DIR}/gzipped/changelog.gz
        DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/sandglassd COMPONENT debian_config EXCLUDE_FROM_ALL)

include(${PROJECT_SOURCE_DIR}/cmake/package.cmake)
