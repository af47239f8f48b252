# The Debian package: `make package` (or `cpack -G DEB` in a build folder) writes
# sandglassd_<version>_amd64.deb, for operators: the daemon and what runs it, not the library.
#
#   /usr/bin/sandglassd
#   /usr/bin/sandglass                           the command-line client
#   /usr/lib/systemd/system/sandglassd.service   ExecStart=/usr/bin/sandglassd ...
#   /etc/sandglass/sandglassd.toml               a conffile: dpkg keeps the operator's edits
#   /usr/share/sandglass/sandglassd.toml         the default, for reference
#   /usr/share/sandglass/prometheus/             scrape config and rules
#   /usr/share/man/man8/sandglassd.8.gz          the manual pages (deploy/man/), and man1/sandglass.1.gz
#   /usr/share/doc/sandglassd/                   copyright, changelog.gz (cmake/debian/)
#
# Depends is computed by dpkg-shlibdeps (dpkg-dev) from the libraries the two binaries link. The
# headers, static libraries and CMake package (component development) stay out: embedders build
# from source or `cmake --install`. The unit is neither enabled nor started: it needs the token
# file /etc/sandglass/auth-token first (see the unit's comment).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME sandglassd)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "Sandglass")
# No project address exists yet: .invalid (RFC 2606) says so, and is a well-formed host.
set(CPACK_PACKAGE_CONTACT "Sandglass maintainers <maintainers@sandglass.invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "deadline-aware job daemon (HTTP/JSON)")
# One line per line of the control file's extended description (at most 80 characters each).
set(CPACK_PACKAGE_DESCRIPTION "sandglassd runs jobs under one end-to-end time budget each: it refuses work
it cannot finish in time, drops work whose deadline passed while queued, and
cancels running work once nobody wants its result.")
# Install with DESTDIR into the staging folder and CMAKE_INSTALL_PREFIX /usr (CPACK_INSTALL_PREFIX
# does that under CPACK_SET_DESTDIR): the unit's ExecStart is written from the prefix, and
# /etc/sandglass lands in the package, not on the machine that builds it.
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)

set(CPACK_COMPONENTS_ALL daemon debian_config)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)
set(CPACK_DEBIAN_PACKAGE_NAME sandglassd)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # sandglassd_0.1.0_amd64.deb
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/cmake/debian/conffiles
    ${PROJECT_SOURCE_DIR}/cmake/debian/postinst
    ${PROJECT_SOURCE_DIR}/cmake/debian/postrm)
include(CPack)
