#include "cli_process.hpp"

#include "temp_files.hpp"
#include "test_paths.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <stdexcept>

extern char** environ;

namespace sandglass::testing {

CliProcess::CliProcess(const std::vector<std::string>& args, const std::vector<std::string>& env)
    : out_path_{temp_path("out.txt")}, err_path_{temp_path("err.txt")} {
  std::vector<std::string> argv_strings{kSandglassCliPath};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry{*e};
    if (entry.starts_with("SANDGLASS_URL=") || entry.starts_with("SANDGLASS_TOKEN=")) continue;
    env_strings.emplace_back(entry);
  }
  env_strings.insert(env_strings.end(), env.begin(), env.end());
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path_.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path_.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  const int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error{std::string{"posix_spawn sandglass: "} + std::strerror(rc)};
}

CliProcess::~CliProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  std::filesystem::remove(out_path_);
  std::filesystem::remove(err_path_);
}

CliResult CliProcess::wait() {
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return {code, slurp(out_path_), slurp(err_path_)};
}

CliResult run_cli(const std::vector<std::string>& args, const std::vector<std::string>& env) {
  return CliProcess{args, env}.wait();
}

std::string url_of(std::uint16_t port) { return "http://127.0.0.1:" + std::to_string(port); }

}  // namespace sandglass::testing
