#include "cluster_bench.hpp"

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
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace sandglass::bench {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

const std::string kPgBin = "/usr/lib/postgresql/15/bin";

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

int run(const std::string& command) { return std::system(command.c_str()); }

// A PostgreSQL 15 in a temporary folder, as the tests start it (pg_ctl here).
class Postgres {
 public:
  Postgres() {
    std::string templ = (fs::temp_directory_path() / "sandglass-bench-pg-XXXXXX").string();
    if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error{"mkdtemp failed"};
    folder_ = templ;
    as_ = ::geteuid() == 0 ? "runuser -u postgres -- " : "";
    if (!as_.empty()) run("chown postgres " + folder_);
    if (run(as_ + kPgBin + "/initdb -D " + folder_ + "/data -U postgres --auth=trust --no-sync "
            "--encoding=UTF8 --locale=C > " + folder_ + "/initdb.log 2>&1") != 0) {
      throw std::runtime_error{"initdb failed; see " + folder_ + "/initdb.log"};
    }
    port_ = 20000 + static_cast<int>(::getpid() % 20000);
    if (run(as_ + kPgBin + "/pg_ctl -D " + folder_ + "/data -l " + folder_ + "/server.log -w -o \"-p " +
            std::to_string(port_) + " -k " + folder_ +
            " -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100\" start > /dev/null") != 0) {
      throw std::runtime_error{"PostgreSQL did not start; see " + folder_ + "/server.log"};
    }
    conn_ = PQconnectdb(conninfo().c_str());
    if (PQstatus(conn_) != CONNECTION_OK) throw std::runtime_error{PQerrorMessage(conn_)};
  }
  ~Postgres() {
    PQfinish(conn_);
    run(as_ + kPgBin + "/pg_ctl -D " + folder_ + "/data -m fast stop > /dev/null 2>&1");
    std::error_code ignored;
    fs::remove_all(folder_, ignored);
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
  void connect() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port_);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) throw std::runtime_error{"connect failed"};
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

std::uint64_t id_in(const std::string& body) {
  const auto at = body.find("\"id\":");
  return at == std::string::npos ? 0 : std::strtoull(body.c_str() + at + 5, nullptr, 10);
}

struct Cluster {
  Postgres& pg;
  std::string sandglassd;
  std::size_t workers;
  std::vector<std::unique_ptr<DaemonChild>> nodes;

  std::string config_path() const {
    const std::string path = (fs::temp_directory_path() / fmt::format("sandglass-bench-cluster-{}.toml", ::getpid())).string();
    std::ofstream{path} << fmt::format(
        "[runtime]\nworkers = {}\ncapacity = 100000\n[log]\nlevel = \"warn\"\n"
        "[cluster]\nconninfo = \"{}\"\nclaim_batch = 64\nheartbeat_ms = 100\nlease_ms = 1000\npoll_ms = 50\n",
        workers, pg.conninfo());
    return path;
  }
  DaemonChild& add() {
    nodes.push_back(std::make_unique<DaemonChild>(sandglassd, std::vector<std::string>{"--config", config_path()}));
    return *nodes.back();
  }
  void stop_all() {
    for (auto& n : nodes) {
      n->signal(SIGTERM);
      n->wait_exit(20s);
    }
    nodes.clear();
  }
  std::string node_name(const DaemonChild& d) const { return "127.0.0.1:" + std::to_string(d.port()); }
};

void reset_queue(Postgres& pg) {
  pg.query("TRUNCATE sandglass_jobs; DELETE FROM sandglass_counters");
}

// The claim-latency histogram summed over the nodes' /metrics: {le -> count}.
std::map<double, double> claim_buckets(Cluster& c) {
  std::map<double, double> sum;
  for (auto& n : c.nodes) {
    Client http{n->port()};
    const std::string body = http.request("GET", "/metrics").second;
    std::size_t at = 0;
    const std::string key = "sandglass_cluster_claim_seconds_bucket{le=\"";
    while ((at = body.find(key, at)) != std::string::npos) {
      at += key.size();
      const std::string le = body.substr(at, body.find('"', at) - at);
      const double bound = le == "+Inf" ? 1e9 : std::stod(le);
      sum[bound] += std::stod(body.substr(body.find(' ', at) + 1));
    }
  }
  return sum;
}

double bucket_quantile(const std::map<double, double>& buckets, double q) {
  if (buckets.empty()) return 0;
  const double total = buckets.rbegin()->second;
  for (const auto& [bound, count] : buckets) {
    if (count >= q * total) return bound * 1000;
  }
  return 0;
}

void idle_latency(Cluster& c) {
  reset_queue(c.pg);
  Client http{c.nodes.front()->port()};
  std::vector<double> rtt;
  for (int i = 0; i < 300; ++i) {
    const auto t0 = Clock::now();
    const auto [status, body] = http.request("POST", "/v1/jobs", R"({"kind":"sleep","args":{"ms":0}})");
    rtt.push_back(ms_between(t0, Clock::now()));
    if (status != 200) throw std::runtime_error{"idle job: " + body};
  }
  const auto q = c.pg.query(
      "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY x), percentile_cont(0.99) WITHIN GROUP (ORDER BY x) "
      "FROM (SELECT extract(epoch FROM claimed_at - created_at) * 1000 AS x FROM sandglass_jobs) d");
  std::printf("enqueue -> start, idle, %zu node(s), 300 no-op jobs one at a time: p50 %.2f ms, p99 %.2f ms "
              "(database clock); submit -> answer round trip p50 %.2f ms, p99 %.2f ms\n",
              c.nodes.size(), std::stod(q[0][0]), std::stod(q[0][1]), quantile(rtt, 0.5), quantile(rtt, 0.99));
}

void throughput(Cluster& c, std::size_t jobs, std::size_t clients) {
  reset_queue(c.pg);
  std::atomic<std::size_t> next{0};
  std::atomic<std::size_t> refused{0};
  const auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < clients; ++t) {
    threads.emplace_back([&, t] {
      Client http{c.nodes[t % c.nodes.size()]->port()};
      while (next.fetch_add(1) < jobs) {
        const auto [status, body] = http.request("POST", "/v1/jobs?wait=false",
                                                 R"({"kind":"sleep","args":{"ms":0},"timeout_ms":120000})");
        if (status != 202) refused.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  const double submit_s = ms_between(t0, Clock::now()) / 1000;
  const std::size_t accepted = jobs - refused.load();
  while (std::stoul(c.pg.scalar("SELECT count(*) FROM sandglass_jobs WHERE state = 'done'")) < accepted) {
    std::this_thread::sleep_for(5ms);
  }
  const double span = std::stod(c.pg.scalar(
      "SELECT extract(epoch FROM max(finished_at) - min(created_at)) FROM sandglass_jobs"));
  const auto buckets = claim_buckets(c);
  std::printf("no-op end to end, %zu node(s) x %zu workers, %zu jobs from %zu connections (no wait): "
              "%.0f jobs/s (first insert -> last outcome, %.2f s); submissions %.0f/s; refused %zu; "
              "claim latency p50 <= %.2f ms, p99 <= %.2f ms (histogram bounds)\n",
              c.nodes.size(), c.workers, accepted, clients, static_cast<double>(accepted) / span, span,
              static_cast<double>(jobs) / submit_s, refused.load(), bucket_quantile(buckets, 0.5),
              bucket_quantile(buckets, 0.99));
}

void cancel_latency(Cluster& c, int rounds) {
  reset_queue(c.pg);
  std::vector<double> lat;
  for (int r = 0; r < rounds; ++r) {
    const std::size_t waiter_node = static_cast<std::size_t>(r) % c.nodes.size();
    std::promise<Clock::time_point> answered;
    std::thread waiter{[&] {
      Client http{c.nodes[waiter_node]->port()};
      http.request("POST", "/v1/jobs", R"({"kind":"sleep","args":{"ms":60000},"timeout_ms":120000})");
      answered.set_value(Clock::now());
    }};
    std::string runner, id;
    while (true) {
      const auto rows = c.pg.query("SELECT id, node_ran FROM sandglass_jobs WHERE state = 'running'");
      if (!rows.empty()) {
        id = rows[0][0];
        runner = rows[0][1];
        break;
      }
      std::this_thread::sleep_for(2ms);
    }
    std::size_t deleter = 0;
    for (std::size_t i = 0; i < c.nodes.size(); ++i) {
      if (c.node_name(*c.nodes[i]) != runner) deleter = i;
    }
    Client http{c.nodes[deleter]->port()};
    const auto t0 = Clock::now();
    http.request("DELETE", "/v1/jobs/" + id);
    const auto t1 = answered.get_future().get();
    waiter.join();
    lat.push_back(ms_between(t0, t1));
  }
  std::printf("cancel -> observed: DELETE on a node other than the runner until the waiting client has "
              "the cancelled outcome, %d rounds: p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
              rounds, quantile(lat, 0.5), quantile(lat, 0.99), quantile(lat, 1.0));
}

void recovery(Cluster& c, int rounds) {
  reset_queue(c.pg);
  for (int r = 0; r < rounds; ++r) {
    Client http{c.nodes.front()->port()};
    const auto [status, body] = http.request("POST", "/v1/jobs?wait=false",
                                             R"({"kind":"sleep","args":{"ms":30000},"timeout_ms":120000})");
    const std::string id = std::to_string(id_in(body));
    std::string runner;
    while ((runner = c.pg.scalar("SELECT node_ran FROM sandglass_jobs WHERE id = " + id + " AND state = 'running'")).empty()) {
      std::this_thread::sleep_for(2ms);
    }
    std::size_t victim = 0;
    for (std::size_t i = 0; i < c.nodes.size(); ++i) {
      if (c.node_name(*c.nodes[i]) == runner) victim = i;
    }
    c.nodes[victim]->signal(SIGKILL);
    const auto t0 = Clock::now();
    while (c.pg.scalar("SELECT attempt FROM sandglass_jobs WHERE id = " + id + " AND state = 'running'") != "2") {
      std::this_thread::sleep_for(1ms);
    }
    const double took = ms_between(t0, Clock::now());
    c.nodes[victim]->wait_exit(10s);
    std::printf("recovery after kill -9 (round %d): claimed again by another node %.0f ms after the kill "
                "(lease_ms 1000, heartbeat_ms 100)\n", r + 1, took);
    c.nodes.erase(c.nodes.begin() + static_cast<std::ptrdiff_t>(victim));
    c.add();
    Client del{c.nodes.front()->port()};
    del.request("DELETE", "/v1/jobs/" + id);
  }
}

}  // namespace

int run_cluster(const Options& o) {
  if (o.sandglassd_path.empty()) {
    std::fprintf(stderr, "sandglass-overload: --cluster needs --sandglassd PATH\n");
    return 2;
  }
  try {
    Postgres pg;
    Cluster c{pg, o.sandglassd_path, o.workers, {}};
    const std::size_t jobs = o.smoke ? 500 : 20'000;
    for (std::size_t k = 1; k <= o.cluster_nodes; ++k) {
      while (c.nodes.size() < k) c.add();
      if (k == 1) idle_latency(c);
      throughput(c, jobs, 16);
    }
    if (c.nodes.size() >= 2) {
      cancel_latency(c, o.smoke ? 5 : 50);
      recovery(c, o.smoke ? 1 : 3);
    }
    c.stop_all();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sandglass-overload --cluster: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace sandglass::bench
