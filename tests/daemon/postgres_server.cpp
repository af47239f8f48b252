#include "postgres_server.hpp"

#include "daemon_process.hpp"

#include <libpq-fe.h>

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <thread>

namespace sandglass::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const std::string kBin = "/usr/lib/postgresql/15/bin";

std::string read_file(const std::string& path) {
  std::ifstream in{path};
  return {std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
}

// Who the server runs as: `postgres` when we are root, else ourselves (no change).
struct RunAs {
  bool change = false;
  uid_t uid = 0;
  gid_t gid = 0;
};

RunAs run_as() {
  if (::geteuid() != 0) return {};
  const passwd* pw = ::getpwnam("postgres");
  if (pw == nullptr) {
    throw std::runtime_error{"tests run as root but there is no user postgres to run PostgreSQL as "
                             "(install the Debian package postgresql; make test does)"};
  }
  return {true, pw->pw_uid, pw->pw_gid};
}

// Starts `argv` as the server's user with stdout and stderr appended to `log`.
pid_t spawn(const std::vector<std::string>& argv, const std::string& log, bool die_with_parent) {
  const RunAs as = run_as();
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error{"fork failed"};
  if (pid == 0) {
    // Only async-signal-safe calls from here on.
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) ::_exit(126);
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, STDIN_FILENO);
    if (as.change && (::setgroups(0, nullptr) != 0 || ::setgid(as.gid) != 0 || ::setuid(as.uid) != 0)) {
      ::_exit(126);
    }
    // After the credential change, which clears it: if the test dies, so does the server.
    if (die_with_parent) {
      ::prctl(PR_SET_PDEATHSIG, SIGQUIT);
      if (::getppid() != parent) ::_exit(1);
    }
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  return pid;
}

int wait_exit(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

struct ConnDeleter {
  void operator()(PGconn* c) const noexcept { PQfinish(c); }
};
struct ResultDeleter {
  void operator()(PGresult* r) const noexcept { PQclear(r); }
};

}  // namespace

PostgresServer::PostgresServer() {
  if (!fs::exists(kBin + "/initdb") || !fs::exists(kBin + "/postgres")) {
    throw std::runtime_error{"PostgreSQL 15 server binaries are missing in " + kBin +
                             ": install the Debian package postgresql (make test does)"};
  }
  std::string templ = (fs::temp_directory_path() / "sandglass-pg-XXXXXX").string();
  if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error{"mkdtemp failed"};
  folder_ = templ;
  const RunAs as = run_as();
  if (as.change && ::chown(folder_.c_str(), as.uid, as.gid) != 0) {
    throw std::runtime_error{"cannot hand " + folder_ + " to user postgres"};
  }
  const std::string log = folder_ + "/initdb.log";
  const pid_t initdb = spawn({kBin + "/initdb", "-D", folder_ + "/data", "-U", "postgres",
                              "--auth=trust", "--no-sync", "--encoding=UTF8", "--locale=C"},
                             log, false);
  if (wait_exit(initdb) != 0) {
    const std::string text = read_file(log);
    fs::remove_all(folder_);
    throw std::runtime_error{"initdb failed: " + text};
  }
  port_ = free_port();
  start();
}

PostgresServer::~PostgresServer() {
  if (pid_ > 0) stop();
  std::error_code ignored;
  fs::remove_all(folder_, ignored);
}

std::string PostgresServer::conninfo() const {
  return "host=127.0.0.1 port=" + std::to_string(port_) + " dbname=postgres user=postgres";
}

void PostgresServer::start() {
  const std::string log = folder_ + "/server.log";
  pid_ = spawn({kBin + "/postgres", "-D", folder_ + "/data", "-p", std::to_string(port_), "-k", folder_,
                "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "shared_buffers=16MB",
                "-c", "max_connections=40"},
               log, true);
  const auto until = std::chrono::steady_clock::now() + 60s;
  while (PQping(conninfo().c_str()) != PQPING_OK) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error{"PostgreSQL exited at start-up: " + read_file(log)};
    }
    if (std::chrono::steady_clock::now() > until) {
      stop();
      throw std::runtime_error{"PostgreSQL did not accept connections within 60 s: " + read_file(log)};
    }
    std::this_thread::sleep_for(20ms);
  }
}

void PostgresServer::stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGINT);
  const auto until = std::chrono::steady_clock::now() + 30s;
  int status = 0;
  while (::waitpid(pid_, &status, WNOHANG) != pid_) {
    if (std::chrono::steady_clock::now() > until) {
      ::kill(pid_, SIGKILL);
      wait_exit(pid_);
      break;
    }
    std::this_thread::sleep_for(10ms);
  }
  pid_ = -1;
}

std::vector<std::vector<std::string>> PostgresServer::query(const std::string& sql) const {
  const std::unique_ptr<PGconn, ConnDeleter> conn{PQconnectdb(conninfo().c_str())};
  if (PQstatus(conn.get()) != CONNECTION_OK) {
    throw std::runtime_error{std::string{"cannot connect to the test server: "} + PQerrorMessage(conn.get())};
  }
  PQsetNoticeProcessor(conn.get(), [](void*, const char*) {}, nullptr);  // "skipping" notices
  const std::unique_ptr<PGresult, ResultDeleter> result{PQexec(conn.get(), sql.c_str())};
  const ExecStatusType status = PQresultStatus(result.get());
  if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
    throw std::runtime_error{sql + ": " + PQresultErrorMessage(result.get())};
  }
  std::vector<std::vector<std::string>> rows;
  for (int r = 0; r < PQntuples(result.get()); ++r) {
    std::vector<std::string> row;
    for (int c = 0; c < PQnfields(result.get()); ++c) row.emplace_back(PQgetvalue(result.get(), r, c));
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string PostgresServer::scalar(const std::string& sql) const {
  const auto rows = query(sql);
  if (rows.empty() || rows.front().empty()) throw std::runtime_error{sql + ": no row"};
  return rows.front().front();
}

}  // namespace sandglass::testing
