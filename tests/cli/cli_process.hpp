// cli_process.hpp — the real `sandglass` binary as a child process of a test: run to its end,
// or started in the background and waited for later. Its environment is the test's without
// SANDGLASS_URL and SANDGLASS_TOKEN, plus what the test names.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <sys/types.h>

namespace sandglass::testing {

struct CliResult {
  int exit_code = -1;  // 128 + signal if killed
  std::string out;
  std::string err;
};

class CliProcess {
 public:
  // Starts `sandglass ARGS...` with `env` ("NAME=value") added to its environment.
  explicit CliProcess(const std::vector<std::string>& args,
                      const std::vector<std::string>& env = {});
  CliProcess(const CliProcess&) = delete;
  CliProcess& operator=(const CliProcess&) = delete;
  ~CliProcess();  // SIGKILL if still running

  // Blocks until it exits.
  CliResult wait();

 private:
  pid_t pid_ = -1;
  std::string out_path_;
  std::string err_path_;
};

// Runs `sandglass ARGS...` to its end.
CliResult run_cli(const std::vector<std::string>& args, const std::vector<std::string>& env = {});

// The URL of a daemon on a loopback port, for --url.
std::string url_of(std::uint16_t port);

}  // namespace sandglass::testing
