// fail_and_slow_commands.hpp — a sandglassd config for tests that need an exec job that fails
// and one that outlives any test budget.
#pragma once

#include "daemon_process.hpp"

#include <string>

namespace sandglass::testing {

// Writes a config with two exec commands: `fail` exits with code 3, `slow` sleeps for 30 s.
// Returns its path.
inline std::string fail_and_slow_commands_config() {
  return write_temp_file("fail_and_slow.toml",
                         "[commands.fail]\nargv = [\"/bin/sh\", \"-c\", \"exit 3\"]\n"
                         "[commands.slow]\nargv = [\"/bin/sleep\", \"30\"]\n");
}

}  // namespace sandglass::testing
