#include "daemon_process.hpp"
#include "temp_files.hpp"
#include "test_paths.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>
#include <utility>

extern char** environ;

namespace sandglass::testing {
namespace {

// Spawns sandglassd (through `launcher`, if not empty) with stdout to `out_fd` and stderr to
// `err_path`.
pid_t spawn(const std::vector<std::string>& args, int out_fd, const std::string& err_path,
            const std::vector<std::string>& launcher = {}) {
  std::vector<std::string> argv_strings = launcher;
  argv_strings.push_back(kSandglassdPath);
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_fd, STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error{std::string{"posix_spawn sandglassd: "} + std::strerror(rc)};
  return pid;
}

int exit_code_of(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

std::string write_temp_file(const std::string& name_hint, const std::string& text) {
  const std::string path = temp_path(name_hint);
  std::ofstream{path} << text;
  return path;
}

DaemonProcess::DaemonProcess(std::vector<std::string> args)
    : DaemonProcess{std::move(args), {}} {}

DaemonProcess::DaemonProcess(std::vector<std::string> args, std::vector<std::string> launcher) {
  log_path_ = temp_path("log.txt");
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw std::runtime_error{"pipe2 failed"};
  if (std::find(args.begin(), args.end(), "--listen") == args.end()) {
    args.insert(args.begin(), {"--listen", "127.0.0.1:0"});
  }
  pid_ = spawn(args, pipe_fds[1], log_path_, launcher);
  ::close(pipe_fds[1]);
  std::string out;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds{30};
  while (out.find('\n') == std::string::npos && std::chrono::steady_clock::now() < until) {
    pollfd p{pipe_fds[0], POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[256];
    const ssize_t n = ::read(pipe_fds[0], buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(pipe_fds[0]);
  const std::string prefix = "listening on 127.0.0.1:";
  const auto at = out.find(prefix);
  if (at == std::string::npos) {
    ::kill(pid_, SIGKILL);
    wait_exit(std::chrono::seconds{10});
    throw std::runtime_error{"sandglassd did not report its port; stdout: " + out + "; log: " + log()};
  }
  port_ = static_cast<std::uint16_t>(std::stoi(out.substr(at + prefix.size())));
}

DaemonProcess::~DaemonProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    wait_exit(std::chrono::seconds{10});
  }
  std::error_code ignored;
  std::filesystem::remove(log_path_, ignored);
}

void DaemonProcess::signal(int sig) {
  if (pid_ > 0) ::kill(pid_, sig);
}

std::optional<int> DaemonProcess::wait_exit(std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      return exit_code_of(status);
    }
    if (r < 0 || std::chrono::steady_clock::now() >= until) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds{5});  // polling a child, not ordering
  }
}

std::string DaemonProcess::log() const { return slurp(log_path_); }

RunResult run_sandglassd(const std::vector<std::string>& args) {
  const std::string out_path = temp_path("out.txt");
  const std::string err_path = temp_path("err.txt");
  const int out_fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const pid_t pid = spawn(args, out_fd, err_path);
  ::close(out_fd);
  int status = 0;
  ::waitpid(pid, &status, 0);
  RunResult r{exit_code_of(status), slurp(out_path), slurp(err_path)};
  std::filesystem::remove(out_path);
  std::filesystem::remove(err_path);
  return r;
}

std::uint16_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::size_t open_fds(pid_t pid) {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e :
       std::filesystem::directory_iterator{"/proc/" + std::to_string(pid) + "/fd"}) {
    ++n;
  }
  return n;
}

}  // namespace sandglass::testing
