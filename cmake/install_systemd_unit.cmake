# Run by `cmake --install` (and by CPack): installs deploy/systemd/sandglassd.service to
# PREFIX/lib/systemd/system with ExecStart naming PREFIX/BINDIR/sandglassd instead of
# /usr/local/bin/sandglassd. Inputs (set by cmake/install.cmake): SANDGLASS_UNIT_SOURCE,
# SANDGLASS_UNIT_WORK_DIR, SANDGLASS_BINDIR.
file(READ "${SANDGLASS_UNIT_SOURCE}" unit)
string(REPLACE "/usr/local/bin/sandglassd" "${CMAKE_INSTALL_PREFIX}/${SANDGLASS_BINDIR}/sandglassd"
       unit "${unit}")
# A folder per destination: installs to different prefixes may run at the same time.
string(MD5 destination "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}")
set(written "${SANDGLASS_UNIT_WORK_DIR}/${destination}/sandglassd.service")
file(WRITE "${written}" "${unit}")
# file(INSTALL) adds DESTDIR and records the file in install_manifest.txt.
file(INSTALL DESTINATION "${CMAKE_INSTALL_PREFIX}/lib/systemd/system" TYPE FILE
     PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ FILES "${written}")
