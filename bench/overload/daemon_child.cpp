#include "daemon_child.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace sandglass::bench {
namespace {

using namespace std::chrono_literals;

// Reads from `fd` until a newline, EOF or `until`.
std::string read_line(int fd, TimePoint until) {
  std::string out;
  while (out.find('\n') == std::string::npos && Clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[256];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

}  // namespace

DaemonChild::DaemonChild(const std::string& path, const std::vector<std::string>& args) {
  log_path_ = (std::filesystem::temp_directory_path() /
               ("sandglass-soak-" + std::to_string(::getpid()) + "-sandglassd.log"))
                  .string();
  std::vector<std::string> argv_text{path, "--listen", "127.0.0.1:0"};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : argv_text) argv.push_back(s.data());
  argv.push_back(nullptr);

  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error{std::string{"pipe2: "} + std::strerror(errno)};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, log_path_.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  const int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  if (rc != 0) {
    ::close(out[0]);
    throw std::runtime_error{"cannot start " + path + ": " + std::strerror(rc)};
  }
  const std::string line = read_line(out[0], Clock::now() + 30s);
  ::close(out[0]);
  const std::string prefix = "listening on 127.0.0.1:";
  const auto at = line.find(prefix);
  if (at == std::string::npos) {
    signal(SIGKILL);
    wait_exit(10s);
    throw std::runtime_error{path + " did not report its port; its log:\n" + log()};
  }
  port_ = static_cast<std::uint16_t>(std::stoi(line.substr(at + prefix.size())));
}

DaemonChild::~DaemonChild() {
  if (!exited_.load()) {
    signal(SIGKILL);
    wait_exit(10s);
  }
  std::error_code ignored;
  std::filesystem::remove(log_path_, ignored);
}

void DaemonChild::signal(int sig) const {
  // Seq-cst load pairs with the store in wait_exit: once it reaped the child, no signal is sent
  // (a signal racing with the reap itself could reach a reused pid; the soak signals first).
  if (pid_ > 0 && !exited_.load()) ::kill(pid_, sig);
}

std::optional<int> DaemonChild::wait_exit(Duration timeout) {
  const TimePoint until = Clock::now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exited_.store(true);
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (r < 0 || Clock::now() >= until) return std::nullopt;
    std::this_thread::sleep_for(2ms);  // polling a child's exit
  }
}

std::string DaemonChild::log() const {
  std::ifstream in{log_path_};
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace sandglass::bench
