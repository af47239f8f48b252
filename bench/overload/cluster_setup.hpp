// cluster_setup.hpp — what the cluster bench's steps and its chaos mode start and talk to: a
// PostgreSQL 15 in a temporary folder (Postgres), keep-alive HTTP/1.1 clients (Client) and the
// sandglassd nodes in cluster mode on loopback (Cluster).
//
// Thread safety: a Postgres, a Client and a Cluster each belong to one thread at a time.
#pragma once

#include "daemon_child.hpp"

#include <fmt/format.h>
#include <libpq-fe.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace sandglass::bench {

inline const std::string kPgBin = "/usr/lib/postgresql/15/bin";

inline double ms_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

inline double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

inline int run(const std::string& command) { return std::system(command.c_str()); }

// A PostgreSQL 15 in a temporary folder, as the tests start it (pg_ctl here).
class Postgres {
 public:
  Postgres() {
    std::string templ = (std::filesystem::temp_directory_path() / "sandglass-bench-pg-XXXXXX").string();
    if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error{"mkdtemp failed"};
    folder_ = templ;
    as_ = ::geteuid() == 0 ? "runuser -u postgres -- " : "";
    if (!as_.empty()) run("chown postgres " + folder_);
    if (run(as_ + kPgBin + "/initdb -D " + folder_ + "/data -U postgres --auth=trust --no-sync "
            "--encoding=UTF8 --locale=C > " + folder_ + "/initdb.log 2>&1") != 0) {
      throw std::runtime_error{"initdb failed; see " + folder_ + "/initdb.log"};
    }
    // fsync=off is this bench's only durability setting, and a bench setting only: the figures
    // leave out the disk (this VM's WAL flushes are slow and vary by tens of ms). The nodes'
    // sessions keep the server's synchronous_commit (on), so every commit still waits for its
    // WAL write. Never run a database whose jobs matter with fsync=off.
    // A port another server may hold: a few tries.
    bool started = false;
    for (int attempt = 0; attempt < 5 && !started; ++attempt) {
      port_ = 20000 + static_cast<int>((::getpid() + 7919 * attempt) % 20000);
      started = start_server();
    }
    if (!started) throw std::runtime_error{"PostgreSQL did not start; see " + folder_ + "/server.log"};
    conn_ = PQconnectdb(conninfo().c_str());
    if (PQstatus(conn_) != CONNECTION_OK) throw std::runtime_error{PQerrorMessage(conn_)};
    // Where the database's time goes, statement by statement, also inside the nodes' functions
    // (track=all): printed under each throughput step with --verbose.
    query("CREATE EXTENSION pg_stat_statements");
    // The bench's own log of outcome writes (filled by a trigger: log_outcome_writes).
    query("CREATE TABLE bench_outcome_log (id bigint, attempt integer, owner text)");
  }
  ~Postgres() {
    PQfinish(conn_);
    stop_server();
    std::error_code ignored;
    std::filesystem::remove_all(folder_, ignored);
  }
  Postgres(const Postgres&) = delete;
  Postgres& operator=(const Postgres&) = delete;
  // pg_ctl stop -m fast (every session ends), `down` of nothing listening, start on the same
  // port; then this connection is reopened. Throws when the server does not start again.
  void restart(std::chrono::milliseconds down) {
    stop_server();
    std::this_thread::sleep_for(down);
    if (!start_server()) throw std::runtime_error{"PostgreSQL did not start again; see " + folder_ + "/server.log"};
    PQreset(conn_);
    if (PQstatus(conn_) != CONNECTION_OK) throw std::runtime_error{PQerrorMessage(conn_)};
  }
  std::string conninfo() const {
    return "host=127.0.0.1 port=" + std::to_string(port_) + " dbname=postgres user=postgres";
  }
  std::vector<std::vector<std::string>> query(const std::string& sql) {
    PGresult* r = PQexec(conn_, sql.c_str());
    const auto status = PQresultStatus(r);
    if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
      const std::string error = PQresultErrorMessage(r);
      PQclear(r);
      throw std::runtime_error{sql + ": " + error};
    }
    std::vector<std::vector<std::string>> rows;
    for (int i = 0; i < PQntuples(r); ++i) {
      rows.emplace_back();
      for (int j = 0; j < PQnfields(r); ++j) rows.back().emplace_back(PQgetvalue(r, i, j));
    }
    PQclear(r);
    return rows;
  }
  std::string scalar(const std::string& sql) {
    const auto rows = query(sql);
    return rows.empty() || rows[0].empty() ? std::string{} : rows[0][0];
  }

 private:
  bool start_server() {
    return run(as_ + kPgBin + "/pg_ctl -D " + folder_ + "/data -l " + folder_ + "/server.log -w -o \"-p " +
               std::to_string(port_) + " -k " + folder_ +
               " -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100 -c track_functions=pl "
               "-c autovacuum_naptime=1 -c shared_preload_libraries=pg_stat_statements "
               "-c pg_stat_statements.track=all\" start > /dev/null 2>&1") == 0;
  }
  void stop_server() { run(as_ + kPgBin + "/pg_ctl -D " + folder_ + "/data -m fast stop > /dev/null 2>&1"); }

  std::string folder_;
  std::string as_;
  int port_ = 0;
  PGconn* conn_ = nullptr;
};

// One keep-alive HTTP/1.1 connection to 127.0.0.1:port.
class Client {
 public:
  explicit Client(std::uint16_t port) : port_{port} { connect(); }
  ~Client() { ::close(fd_); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Returns {status, body}; throws on a broken connection.
  std::pair<int, std::string> request(const std::string& method, const std::string& target,
                                      const std::string& body = {}) {
    const std::string req = fmt::format(
        "{} {} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{}",
        method, target, body.size(), body);
    for (std::size_t sent = 0; sent < req.size();) {
      const ssize_t n = ::send(fd_, req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) throw std::runtime_error{"send failed"};
      sent += static_cast<std::size_t>(n);
    }
    std::size_t head_end;
    while ((head_end = buf_.find("\r\n\r\n")) == std::string::npos) fill();
    const int status = std::atoi(buf_.c_str() + 9);
    std::size_t length = 0;
    std::string head = buf_.substr(0, head_end);
    for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (const auto at = head.find("content-length:"); at != std::string::npos) {
      length = std::strtoul(head.c_str() + at + 15, nullptr, 10);
    }
    while (buf_.size() < head_end + 4 + length) fill();
    std::string out = buf_.substr(head_end + 4, length);
    buf_.erase(0, head_end + 4 + length);
    return {status, out};
  }

 private:
  // A node just resumed (PausedNodes) or started may refuse for a moment: a few more tries.
  void connect() {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port_);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int attempt = 1;; ++attempt) {
      fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
      if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) break;
      const int error = errno;
      ::close(fd_);
      if (attempt == 100 || (error != ECONNREFUSED && error != EAGAIN && error != ETIMEDOUT)) {
        throw std::runtime_error{fmt::format("connect to 127.0.0.1:{} failed after {} tries: {}", port_,
                                             attempt, std::strerror(error))};
      }
      std::this_thread::sleep_for(std::chrono::milliseconds{10});
    }
    const int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  void fill() {
    char chunk[16384];
    const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n <= 0) throw std::runtime_error{"connection closed"};
    buf_.append(chunk, static_cast<std::size_t>(n));
  }
  std::uint16_t port_;
  int fd_ = -1;
  std::string buf_;
};

inline std::uint64_t id_in(const std::string& body) {
  const auto at = body.find("\"id\":");
  return at == std::string::npos ? 0 : std::strtoull(body.c_str() + at + 5, nullptr, 10);
}

struct Cluster {
  Postgres& pg;
  std::string sandglassd;
  std::size_t workers;
  double estimate_quantile;  // the nodes' runtime.estimate_quantile (--estimate-quantile)
  std::vector<std::unique_ptr<DaemonChild>> nodes;
  std::string extra_config;  // TOML tables appended to every node's config (after [cluster])

  static constexpr int kHeartbeatMs = 100;
  static constexpr int kLeaseMs = 1000;

  ~Cluster() {
    std::error_code ignored;
    std::filesystem::remove(config_file(), ignored);
  }
  static std::string config_file() {
    return (std::filesystem::temp_directory_path() / fmt::format("sandglass-bench-cluster-{}.toml", ::getpid())).string();
  }
  std::string config_path() const {
    const std::string path = config_file();
    std::ofstream{path} << fmt::format(
        "[runtime]\nworkers = {}\ncapacity = 100000\nestimate_quantile = {:.6f}\n"
        // A steadier run-time estimate than the defaults (128 samples, kept ~10 typical runs):
        // a cluster node learns from every node's outcomes, ~240/s here, so 128 samples are
        // half a second of them and their 0.99 quantile is about the second largest; cut jobs
        // (wasted work) follow its dips. 1024 samples kept up to 3 s: about 700 (measured in
        // the claim-ahead measurement).
        "estimate_window = 1024\nestimate_max_age_ms = 3000\n"
        "[log]\nlevel = \"warn\"\n"
        // The answer's way home crosses the database (a batch write, a NOTIFY, a read of the
        // record): more than a lone daemon's 5 ms reserve.
        "[budget]\nreserve_ms = 50\n"
        "[cluster]\nconninfo = \"{}\"\nclaim_batch = 64\nheartbeat_ms = {}\nlease_ms = {}\npoll_ms = 50\n{}",
        workers, estimate_quantile, pg.conninfo(), kHeartbeatMs, kLeaseMs, extra_config);
    return path;
  }
  DaemonChild& add() {
    nodes.push_back(std::make_unique<DaemonChild>(sandglassd, std::vector<std::string>{"--config", config_path()}));
    return *nodes.back();
  }
  void stop_all() {
    for (auto& n : nodes) {
      n->signal(SIGTERM);
      n->wait_exit(std::chrono::seconds{20});
    }
    nodes.clear();
  }
  // A node's default name (HOSTNAME:PORT of its bound port): what node_ran and owner carry.
  static std::string node_name(const DaemonChild& d) {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    return std::string{host} + ":" + std::to_string(d.port());
  }
};

}  // namespace sandglass::bench
