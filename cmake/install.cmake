# Installs headers, the layer libraries and an exported CMake package:
#   find_package(sandglass CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE sandglass::sandglass)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(DIRECTORY include/sandglass DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS sandglass sandglass_runtime sandglass_workers sandglass_queue sandglass_core
        EXPORT sandglassTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT sandglassTargets NAMESPACE sandglass::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/sandglass)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/sandglassConfig.cmake.in
  ${PROJECT_BINARY_DIR}/sandglassConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/sandglass)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/sandglassConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/sandglassConfig.cmake
              ${PROJECT_BINARY_DIR}/sandglassConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/sandglass)
