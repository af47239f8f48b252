# A ctest check: doctest_discover_tests registers each test case under its name, and CMake
# splits a name at ';' (its list separator), so a case whose name holds one is registered under a
# prefix that matches no case, and ctest reports it passed without running it. Fails when a test
# binary has such a case. Called with -DBINARIES="a|b|c".
string(REPLACE "|" ";" binaries "${BINARIES}")
set(bad "")
foreach(binary IN LISTS binaries)
  execute_process(COMMAND ${binary} --list-test-cases --no-version
                  OUTPUT_VARIABLE listing RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${binary} --list-test-cases failed (${rc})")
  endif()
  string(REPLACE ";" "<SEMICOLON>" listing "${listing}")
  string(REPLACE "\n" ";" lines "${listing}")
  foreach(line IN LISTS lines)
    if(line MATCHES "<SEMICOLON>")
      string(REPLACE "<SEMICOLON>" "\\;" line "${line}")
      string(APPEND bad "  ${line}\n")
    endif()
  endforeach()
endforeach()
if(bad)
  message(FATAL_ERROR "test names with ';' are never run by ctest; use ',' instead:\n${bad}")
endif()
