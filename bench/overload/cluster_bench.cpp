#include "cluster_bench.hpp"

#include "cluster_setup.hpp"
#include "daemon_child.hpp"
#include "http_driver.hpp"
#include "report.hpp"

#include "daemon/cluster/run_time_sharing.hpp"

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
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <latch>
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

void reset_queue(Postgres& pg) {
  pg.query("TRUNCATE sandglass_jobs; DELETE FROM sandglass_counters; TRUNCATE bench_outcome_log");
}

// Each node's /metrics text.
std::vector<std::string> node_metrics(Cluster& c) {
  std::vector<std::string> bodies;
  for (auto& n : c.nodes) bodies.push_back(Client{n->port()}.request("GET", "/metrics").second);
  return bodies;
}

// The buckets of histogram `series` summed over the nodes (cumulative counts by upper bound).
std::map<double, double> node_buckets(Cluster& c, const std::string& series) {
  std::map<double, double> sum;
  for (const std::string& body : node_metrics(c)) {
    std::size_t at = 0;
    const std::string key = series + "_bucket{le=\"";
    while ((at = body.find(key, at)) != std::string::npos) {
      at += key.size();
      const std::string le = body.substr(at, body.find('"', at) - at);
      const double bound = le == "+Inf" ? 1e9 : std::stod(le);
      sum[bound] += std::stod(body.substr(body.find(' ', at) + 1));
    }
  }
  return sum;
}

std::map<double, double> claim_buckets(Cluster& c) { return node_buckets(c, "sandglass_cluster_claim_seconds"); }

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

// The value of the sample line `series` (no labels) summed over the nodes' /metrics.
double node_total(Cluster& c, const std::string& series) {
  double sum = 0;
  for (const std::string& body : node_metrics(c)) {
    const std::size_t at = body.find("\n" + series + " ");
    if (at != std::string::npos) sum += std::stod(body.substr(at + series.size() + 2));
  }
  return sum;
}

// What a commit point costs in a cluster (daemon/cluster/commit_points.cpp): `jobs` sleep jobs
// that pass a commit point at once, one at a time on an idle cluster, then `jobs` more from 8
// submitters at once; from each handler's commit() until its mark is written in the job's row,
// by the nodes' histogram (sandglass_cluster_commit_point_seconds: bounds, and the mean).
void commit_points(Cluster& c, std::size_t jobs) {
  reset_queue(c.pg);
  const std::string body = R"({"kind":"sleep","args":{"ms":0,"commit_at_ms":0}})";
  const auto report = [&c](const char* how, double& count_before, double& sum_before) {
    const auto buckets = node_buckets(c, "sandglass_cluster_commit_point_seconds");
    const double count = node_total(c, "sandglass_cluster_commit_point_seconds_count");
    const double sum = node_total(c, "sandglass_cluster_commit_point_seconds_sum");
    std::printf("commit points, %zu node(s), %s: %.0f marks, commit() -> mark written mean %.2f ms, "
                "p50 <= %.1f ms, p99 <= %.1f ms (histogram bounds, cumulative); refused %.0f\n",
                c.nodes.size(), how, count - count_before,
                count > count_before ? (sum - sum_before) * 1000 / (count - count_before) : 0.0,
                bucket_quantile(buckets, 0.5), bucket_quantile(buckets, 0.99),
                node_total(c, "sandglass_cluster_commit_points_refused_total"));
    count_before = count;
    sum_before = sum;
  };
  double count = node_total(c, "sandglass_cluster_commit_point_seconds_count");
  double sum = node_total(c, "sandglass_cluster_commit_point_seconds_sum");
  {
    Client http{c.nodes.front()->port()};
    for (std::size_t i = 0; i < jobs; ++i) {
      const auto [status, answer] = http.request("POST", "/v1/jobs", body);
      if (status != 200) throw std::runtime_error{"commit point job: " + answer};
    }
  }
  report("one job at a time", count, sum);
  std::vector<std::future<void>> submitters;
  for (std::size_t k = 0; k < 8; ++k) {
    submitters.push_back(std::async(std::launch::async, [&c, &body, jobs, k] {
      Client http{c.nodes[k % c.nodes.size()]->port()};
      for (std::size_t i = 0; i < jobs / 8; ++i) {
        const auto [status, answer] = http.request("POST", "/v1/jobs", body);
        if (status != 200) throw std::runtime_error{"commit point job: " + answer};
      }
    }));
  }
  for (auto& s : submitters) s.get();
  report("8 submitters at once", count, sum);
}

// Where the database's time went since the last call: calls and mean time of the cluster's
// functions (track_functions = pl; total time includes the functions they call).
std::string function_times(Postgres& pg) {
  const auto rows = pg.query(
      "SELECT funcname, calls, total_time FROM pg_stat_user_functions "
      "WHERE funcname IN ('sandglass_submit_many', 'sandglass_submit_claim', 'sandglass_claim', "
      "'sandglass_finish', 'sandglass_finish_claim', 'sandglass_beat', 'sandglass_sweep', "
      "'sandglass_record_commits') "
      "ORDER BY total_time DESC");
  pg.query("SELECT pg_stat_reset()");
  std::string out;
  for (const auto& r : rows) {
    const double calls = std::stod(r[1]);
    out += fmt::format("{}{} {} calls, {:.0f} ms, {:.3f} ms each", out.empty() ? "" : "; ", r[0], r[1],
                       std::stod(r[2]), calls > 0 ? std::stod(r[2]) / calls : 0.0);
  }
  return out;
}

// The statements that took most of the database's time since the last call (pg_stat_statements,
// nested ones included), one per line; then resets the statistics.
std::string statement_times(Postgres& pg, std::size_t top) {
  const auto rows = pg.query(fmt::format(
      "SELECT calls, round(total_exec_time::numeric, 1), round(mean_exec_time::numeric, 4), "
      "rows, left(regexp_replace(query, '\\s+', ' ', 'g'), 110) FROM pg_stat_statements "
      "ORDER BY total_exec_time DESC LIMIT {}", top));
  pg.query("SELECT pg_stat_statements_reset()");
  std::string out;
  for (const auto& r : rows) {
    out += fmt::format("      {:>7} calls {:>9} ms {:>8} ms each {:>7} rows  {}\n", r[0], r[1], r[2], r[3], r[4]);
  }
  return out;
}

// How many times the nodes' functions called pg_notify since the statistics were last reset, by
// channel (pg_stat_statements, nested included: the statement texts of 003-009): each call's
// transaction takes PostgreSQL's NOTIFY lock at commit.
std::string notify_counts(Postgres& pg) {
  const auto rows = pg.query(
      "SELECT coalesce(sum(calls) FILTER (WHERE query LIKE '%pg_notify(%kn.name)%'), 0), "
      "coalesce(sum(calls) FILTER (WHERE query LIKE '%pg_notify(%v_payload)%'), 0) FROM pg_stat_statements");
  return fmt::format("pg_notify statements: sandglass_queued (one per kind) {}, sandglass_outcome {}",
                     rows[0][0], rows[0][1]);
}

void throughput(Cluster& c, std::size_t jobs, std::size_t clients, bool verbose) {
  reset_queue(c.pg);
  function_times(c.pg);
  statement_times(c.pg, 0);
  std::atomic<std::size_t> next{0};
  std::atomic<std::size_t> refused{0};
  const auto t0 = Clock::now();
  std::vector<std::future<void>> submitters;  // a client's failure reaches get(), not terminate
  for (std::size_t t = 0; t < clients; ++t) {
    submitters.push_back(std::async(std::launch::async, [&, t] {
      Client http{c.nodes[t % c.nodes.size()]->port()};
      while (next.fetch_add(1) < jobs) {
        const auto [status, body] = http.request("POST", "/v1/jobs?wait=false",
                                                 R"({"kind":"sleep","args":{"ms":0},"timeout_ms":120000})");
        if (status != 202) refused.fetch_add(1);
      }
    }));
  }
  for (auto& s : submitters) s.get();
  const double submit_s = ms_between(t0, Clock::now()) / 1000;
  const std::size_t accepted = jobs - refused.load();
  // Every accepted job is inserted by now; all have ended when none is queued or running. Each
  // of those is a partial index (a count of done rows scanned the table: 4.5 ms of database
  // time every 50 ms, 5 % of the step's, taken from the nodes being measured).
  while (c.pg.scalar("SELECT (SELECT count(*) FROM sandglass_jobs WHERE state = 'queued') + "
                     "(SELECT count(*) FROM sandglass_jobs WHERE state = 'running')") != "0") {
    std::this_thread::sleep_for(20ms);
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
  std::printf("    database time (track_functions): %s\n", function_times(c.pg).c_str());
  if (verbose) {
    std::printf("    %s\n", notify_counts(c.pg).c_str());
    std::printf("    statements (pg_stat_statements, nested included):\n%s", statement_times(c.pg, 25).c_str());
  }
}

void cancel_latency(Cluster& c, int rounds) {
  reset_queue(c.pg);
  std::vector<double> lat;
  for (int r = 0; r < rounds; ++r) {
    const std::size_t waiter_node = static_cast<std::size_t>(r) % c.nodes.size();
    auto answered = std::async(std::launch::async, [&] {
      Client http{c.nodes[waiter_node]->port()};
      http.request("POST", "/v1/jobs", R"({"kind":"sleep","args":{"ms":60000},"timeout_ms":120000})");
      return Clock::now();
    });
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
    const auto t1 = answered.get();
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

// A libpq connection of the bench's own (one per claimer thread). Like a node's session
// (daemon/cluster/pg_session.hpp) it prepares each statement text once and then runs it by name.
class PgConn {
 public:
  explicit PgConn(const std::string& conninfo) : conn_{PQconnectdb(conninfo.c_str())} {
    if (PQstatus(conn_) != CONNECTION_OK) throw std::runtime_error{PQerrorMessage(conn_)};
  }
  ~PgConn() { PQfinish(conn_); }
  PgConn(const PgConn&) = delete;
  PgConn& operator=(const PgConn&) = delete;
  // Runs `sql` with text parameters; returns the first column of every row.
  std::vector<std::string> exec(const std::string& sql, const std::vector<std::string>& params) {
    std::vector<const char*> values;
    for (const std::string& p : params) values.push_back(p.c_str());
    auto at = prepared_.find(sql);
    if (at == prepared_.end()) {
      std::string name = fmt::format("bench_{}", prepared_.size() + 1);
      PQclear(check(sql, PQprepare(conn_, name.c_str(), sql.c_str(), static_cast<int>(values.size()), nullptr)));
      at = prepared_.emplace(sql, std::move(name)).first;
    }
    PGresult* r = check(sql, PQexecPrepared(conn_, at->second.c_str(), static_cast<int>(values.size()),
                                            values.data(), nullptr, nullptr, 0));
    std::vector<std::string> out;
    for (int i = 0; i < PQntuples(r); ++i) out.emplace_back(PQgetvalue(r, i, 0));
    PQclear(r);
    return out;
  }

 private:
  static PGresult* check(const std::string& sql, PGresult* r) {
    const auto status = PQresultStatus(r);
    if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
      const std::string error = PQresultErrorMessage(r);
      PQclear(r);
      throw std::runtime_error{sql + ": " + error};
    }
    return r;
  }
  PGconn* conn_;
  std::map<std::string, std::string> prepared_;  // statement text -> its name
};

// One claimer of the claims step: `exchanges` statements on its own connection, each the
// nodes' own sandglass_finish_claim with the outcomes of the jobs its last statement claimed and
// a claim of `batch` more, then one with the outcomes only. It shares its run times by a node's
// rule (RunTimeSharing: every outcome announced at most once per kShareRunTimes; the claimbench
// jobs are not awaited, so the other exchanges announce nothing). Closed loop when `period` is
// zero (each statement follows the last one's answer); else open loop: statement i is due at
// `start` + i x `period` and its latency counts from then, so a statement held up by the ones
// before it is charged the wait (no coordinated omission). Returns each claiming statement's
// latency in ms. Before it, on the same connection, kWarmup statements like them, untimed (a
// session's first call plans every statement of the functions: tens of ms, once per
// connection, which a node pays once per connection too); then it arrives at `ready` and
// waits for `go`, after which `start` is set.
constexpr std::size_t kWarmup = 2;

std::vector<double> run_claimer(const std::string& conninfo, std::size_t k, std::size_t batch,
                                std::size_t exchanges, Clock::duration period,
                                const Clock::time_point& start, std::latch& ready, std::latch& go,
                                std::atomic<std::size_t>& claimed) {
  PgConn db{conninfo};
  const std::string owner = fmt::format("claimbench-{}/0", k);
  const std::string node = fmt::format("claimbench-{}", k);
  daemon::cluster::RunTimeSharing sharing;
  std::vector<double> latencies;
  std::vector<std::string> ids;  // claimed by the last statement: their outcomes go next
  for (std::size_t n = 0; n <= kWarmup + exchanges; ++n) {
    if (n == kWarmup) {
      ready.count_down();
      go.wait();
    }
    const bool timed = n >= kWarmup;
    const std::size_t i = timed ? n - kWarmup : 0;  // the timed statement's index
    std::string id_list = "{", ones = "{", states = "{", reasons = "{", nulls = "{", fs = "{", zeros = "{";
    for (std::size_t j = 0; j < ids.size(); ++j) {
      const char* sep = j == 0 ? "" : ",";
      id_list += sep + ids[j];
      ones += std::string{sep} + "1";
      states += std::string{sep} + "completed";
      reasons += std::string{sep} + "ok";
      nulls += std::string{sep} + "NULL";
      fs += std::string{sep} + "f";
      zeros += std::string{sep} + "0";
    }
    for (std::string* s : {&id_list, &ones, &states, &reasons, &nulls, &fs, &zeros}) *s += "}";
    const bool last = timed && i == exchanges;  // outcomes only
    const Clock::time_point due = start + static_cast<Clock::rep>(i) * period;
    if (timed && period > Clock::duration::zero()) std::this_thread::sleep_until(due);
    const auto a = Clock::now();
    const bool share = !ids.empty() && sharing.due(a);
    std::vector<std::string> params{owner, node, id_list, ones, states, reasons, nulls, fs, nulls,
                                    nulls, zeros, last ? "0" : std::to_string(batch)};
    params.emplace_back(share ? "t" : "f");
    const std::vector<std::string> rows = db.exec(
        fmt::format("SELECT coalesce(written, -job_id) FROM sandglass_finish_claim($1, $2, "
                    "$3::bigint[], $4::int[], $5::text[], $6::text[], $7::text[], $8::boolean[], "
                    "$9::text[], $10::text[], $11::bigint[], $12, '{{claimbench}}', '{{0}}', $13) "
                    "WHERE written IS NOT NULL OR job_id IS NOT NULL"),
        params);
    const auto b = Clock::now();
    if (share) sharing.shared(a);
    if (timed && !last) latencies.push_back(ms_between(period > Clock::duration::zero() ? due : a, b));
    ids.clear();
    for (const std::string& r : rows) {
      if (r.starts_with("-")) ids.push_back(r.substr(1));  // claimed (the others: written)
    }
    if (timed) claimed.fetch_add(ids.size());
    if (ids.empty() && !last) {
      if (!timed) throw std::runtime_error{"claims step: the queue ran out during the warm-up"};
      break;
    }
  }
  return latencies;
}

struct ClaimRun {
  std::vector<double> latencies;  // ms, every claiming statement of every claimer
  std::size_t claimed = 0;
  double seconds = 0;
};

// `claimers` run_claimer threads at once, started together once all have warmed up (period as
// there, each claimer's schedule offset by its share of one period, so that the total rate is
// even). Each claimer takes (kWarmup + exchanges) x batch rows.
ClaimRun run_claimers(Cluster& c, std::size_t claimers, std::size_t exchanges, std::size_t batch,
                      Clock::duration period) {
  std::vector<std::vector<double>> per(claimers);
  std::vector<Clock::time_point> starts(claimers);
  std::atomic<std::size_t> claimed{0};
  std::latch ready{static_cast<std::ptrdiff_t>(claimers)};
  std::latch go{1};
  std::vector<std::thread> threads;
  for (std::size_t k = 0; k < claimers; ++k) {
    threads.emplace_back([&, k] {
      per[k] = run_claimer(c.pg.conninfo(), k, batch, exchanges, period, starts[k], ready, go,
                           claimed);
    });
  }
  ready.wait();
  const auto t0 = Clock::now();
  for (std::size_t k = 0; k < claimers; ++k) {
    starts[k] = t0 + period * static_cast<Clock::rep>(k) / static_cast<Clock::rep>(claimers);
  }
  go.count_down();  // the starts are written before (latch: happens-before the waiters' return)
  for (auto& t : threads) t.join();
  ClaimRun run{.claimed = claimed.load(), .seconds = ms_between(t0, Clock::now()) / 1000};
  for (const auto& v : per) run.latencies.insert(run.latencies.end(), v.begin(), v.end());
  return run;
}

// The floor under any exchange on this machine: `clients` connections in a closed loop, each
// running `statements` times one statement of its own (params(k) are client k's), started
// together. Returns every statement's latency in ms.
std::vector<double> closed_loop(const std::string& conninfo, std::size_t clients, std::size_t statements,
                                const std::string& sql,
                                const std::function<std::vector<std::string>(std::size_t)>& params) {
  std::vector<std::vector<double>> per(clients);
  std::latch ready{static_cast<std::ptrdiff_t>(clients)};
  std::latch go{1};
  std::vector<std::thread> threads;
  for (std::size_t k = 0; k < clients; ++k) {
    threads.emplace_back([&, k] {
      PgConn db{conninfo};
      const std::vector<std::string> p = params(k);
      for (std::size_t n = 0; n < kWarmup; ++n) db.exec(sql, p);
      ready.count_down();
      go.wait();
      for (std::size_t n = 0; n < statements; ++n) {
        const auto a = Clock::now();
        db.exec(sql, p);
        per[k].push_back(ms_between(a, Clock::now()));
      }
    });
  }
  ready.wait();
  go.count_down();
  for (auto& t : threads) t.join();
  std::vector<double> all;
  for (const auto& v : per) all.insert(all.end(), v.begin(), v.end());
  return all;
}

// What no exchange can beat here: the claimers' closed loop with statements that do less than
// any exchange must. A round trip (SELECT 1), and the least an exchange of `batch` outcomes and
// `batch` claims writes: one UPDATE of 2 x `batch` rows by primary key, each client its own
// rows (no lock waits), updated in place (HOT: no indexed column changes, fillfactor 50), in a
// table of its own (bench_floor) that holds nothing else.
std::string exchange_floor(Cluster& c, std::size_t claimers, std::size_t statements, std::size_t batch) {
  const std::size_t rows = 2 * batch;
  c.pg.query(fmt::format(
      "CREATE TABLE bench_floor (id integer PRIMARY KEY, v bigint NOT NULL) WITH (fillfactor = 50); "
      "INSERT INTO bench_floor SELECT g, 0 FROM generate_series(0, {}) g",
      claimers * rows - 1));
  c.pg.query("VACUUM ANALYZE bench_floor");
  const auto own_rows = [rows](std::size_t k) {
    std::string ids = "{";
    for (std::size_t j = 0; j < rows; ++j) ids += fmt::format("{}{}", j == 0 ? "" : ",", k * rows + j);
    return std::vector<std::string>{ids + "}"};
  };
  const std::string update = "UPDATE bench_floor SET v = v + 1 WHERE id = ANY ($1::integer[])";
  const auto none = [](std::size_t) { return std::vector<std::string>{}; };
  const std::string conninfo = c.pg.conninfo();
  const std::vector<double> ping_alone = closed_loop(conninfo, 1, statements, "SELECT 1", none);
  const std::vector<double> ping = closed_loop(conninfo, claimers, statements, "SELECT 1", none);
  const std::vector<double> write_alone = closed_loop(conninfo, 1, statements, update, own_rows);
  const std::vector<double> write = closed_loop(conninfo, claimers, statements, update, own_rows);
  c.pg.query("DROP TABLE bench_floor");
  return fmt::format(
      "    the floor, {} clients in a closed loop, {} statements each (alone: 1 client): SELECT 1 "
      "p50 {:.3f} ms, p99 {:.3f} ms (alone p50 {:.3f}); an UPDATE of {} rows of its own (HOT) p50 "
      "{:.3f} ms, p99 {:.3f} ms (alone p50 {:.3f})\n",
      claimers, statements, quantile(ping, 0.5), quantile(ping, 0.99), quantile(ping_alone, 0.5),
      rows, quantile(write, 0.5), quantile(write, 0.99), quantile(write_alone, 0.5));
}

// The cluster's nodes stopped (SIGSTOP) for the object's life, then continued. An idle node
// claims every poll_ms. A hungry node looks for the kinds it serves with a few index descents
// (functions.sql, "Hungry nodes"), so it costs the server little; still, the claims step
// measures the claimers' statements alone, with nothing else claiming beside them: the
// claims step's claimbench rows (54,000) are never read by a node that does not serve their
// kind, and the figures are the claimers' own.
class PausedNodes {
 public:
  explicit PausedNodes(Cluster& c) : c_{c} {
    for (auto& n : c_.nodes) n->signal(SIGSTOP);
  }
  ~PausedNodes() {
    for (auto& n : c_.nodes) n->signal(SIGCONT);
  }
  PausedNodes(const PausedNodes&) = delete;
  PausedNodes& operator=(const PausedNodes&) = delete;

 private:
  Cluster& c_;
};

// Claim latency with `claimers` concurrent claimers, each a node of its own (its own name, so
// its own counter rows, as every node has) on its own connection, over a queue of 4 classes
// and mixed budgets (run_claimer). Three runs:
// - one claimer alone: the server time of one exchange uncontended (its round trip);
// - closed loop, `claims_each` statements per claimer: saturation. On this machine's cores
//   Little's law bounds its p50 from below by claimers x (one exchange's time alone) / cores,
//   even with no lock waits at all: printed next to it;
// - paced (open loop): the claimers issue `paced_rate` statements per second in all (the
//   cluster's no-op goal of 5,000 jobs/s is 625 statements of 8 a second), latency from each
//   statement's scheduled time.
// Then the floor under the closed loop (exchange_floor): the same clients with statements that
// do less than any exchange.
// The kind "claimbench" is served by no node, so the running nodes do not take these jobs; they
// are stopped meanwhile (PausedNodes).
void claim_latency(Cluster& c, std::size_t claimers, std::size_t claims_each, std::size_t batch,
                   double paced_rate, bool verbose) {
  reset_queue(c.pg);
  const std::size_t solo_each = claims_each / 2;
  const std::size_t paced_each = claims_each / 2;
  const std::size_t jobs =
      (kWarmup + solo_each + claimers * (2 * kWarmup + claims_each + paced_each)) * batch;
  c.pg.query(fmt::format(
      "INSERT INTO sandglass_jobs (kind, args, priority, budget_us, deadline, awaited) "
      "SELECT 'claimbench', '{{}}', (g % 4)::smallint, 120000000, "
      "clock_timestamp() + (60 + g % 60) * interval '1 second', false FROM generate_series(1, {}) g",
      jobs));  // nobody waits
  c.pg.query("VACUUM ANALYZE sandglass_jobs");
  // The claimers are live nodes to the nodes' sweeps (else their running jobs look lost and are
  // taken back: fencing at work, but not what is measured here).
  for (std::size_t k = 0; k < claimers; ++k) {
    c.pg.query(fmt::format("INSERT INTO sandglass_nodes (owner, node, workers, capacity, heartbeat_at) "
                           "VALUES ('claimbench-{}/0', 'claimbench-{}', 0, 0, 'infinity')", k, k));
  }
  std::optional<PausedNodes> paused{std::in_place, c};
  statement_times(c.pg, 0);
  const ClaimRun solo = run_claimers(c, 1, solo_each, batch, Clock::duration::zero());
  // What one exchange's time is made of, uncontended (nested statements included).
  const std::string solo_statements = verbose ? statement_times(c.pg, 15) : std::string{};
  const ClaimRun closed = run_claimers(c, claimers, claims_each, batch, Clock::duration::zero());
  const auto period = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(static_cast<double>(claimers) / paced_rate));
  const ClaimRun paced = run_claimers(c, claimers, paced_each, batch, period);
  const std::string floor = exchange_floor(c, claimers, claims_each, batch);
  paused.reset();
  c.pg.query("DELETE FROM sandglass_nodes WHERE node LIKE 'claimbench-%'");
  const std::string doubles = c.pg.scalar(
      "SELECT count(*) FROM sandglass_jobs WHERE kind = 'claimbench' AND (state <> 'done' OR attempt <> 1)");
  const double cores = std::max(1u, std::thread::hardware_concurrency());
  const double alone = quantile(solo.latencies, 0.5);
  std::printf("    (the cluster's nodes were stopped meanwhile: PausedNodes)\n");
  std::printf("claim latency, %zu concurrent claimers, one node each (sandglass_finish_claim: the "
              "outcomes of the last %zu jobs and a claim of %zu more), %zu statements: p50 %.3f ms, "
              "p90 %.3f ms, p99 %.3f ms, max %.2f ms; %zu jobs claimed and finished in %.2f s "
              "(%.0f jobs/s); rows not done exactly once: %s\n",
              claimers, batch, batch, closed.latencies.size(), quantile(closed.latencies, 0.5),
              quantile(closed.latencies, 0.9), quantile(closed.latencies, 0.99),
              quantile(closed.latencies, 1.0), closed.claimed, closed.seconds,
              static_cast<double>(closed.claimed) / closed.seconds, doubles.c_str());
  std::printf("    closed loop (saturation): one claimer alone p50 %.3f ms, p99 %.3f ms (%zu statements); "
              "Little's law on %.0f cores: p50 >= %zu x %.3f / %.0f = %.3f ms with no lock waits at all\n",
              alone, quantile(solo.latencies, 0.99), solo.latencies.size(), cores, claimers, alone,
              cores, static_cast<double>(claimers) * alone / cores);
  if (verbose) {
    std::printf("    statements of the lone claimer (pg_stat_statements, nested included):\n%s",
                solo_statements.c_str());
  }
  std::printf("%s", floor.c_str());
  std::printf("claim latency, paced: %zu claimers, %.0f statements/s in all (%.0f jobs/s), open loop, "
              "from each statement's scheduled time, %zu statements: p50 %.3f ms, p90 %.3f ms, "
              "p99 %.3f ms, max %.2f ms; %zu jobs claimed in %.2f s\n",
              claimers, paced_rate, paced_rate * static_cast<double>(batch), paced.latencies.size(),
              quantile(paced.latencies, 0.5), quantile(paced.latencies, 0.9),
              quantile(paced.latencies, 0.99), quantile(paced.latencies, 1.0), paced.claimed,
              paced.seconds);
}

// Logs every write of an outcome (a row becoming done), so that duplicates can be counted.
void log_outcome_writes(Postgres& pg) {
  pg.query(
      "CREATE OR REPLACE FUNCTION bench_log_outcome() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
      " IF NEW.state = 'done' AND OLD.state <> 'done' THEN"
      "   INSERT INTO bench_outcome_log VALUES (NEW.id, NEW.attempt, NEW.owner); END IF;"
      " RETURN NEW; END $$;"
      "CREATE OR REPLACE TRIGGER bench_log_outcome AFTER UPDATE ON sandglass_jobs FOR EACH ROW"
      " EXECUTE FUNCTION bench_log_outcome();"
      "TRUNCATE bench_outcome_log");
}

// By the database's clock, over the jobs of the run: claimed after their deadline (what the
// claim rule forbids); started after it, with the start taken as finished_at - run_us (later
// than the real start, by the outcome's write lag: an upper bound); jobs with more than one
// outcome write; jobs not ended.
void print_deadline_and_duplicates(Postgres& pg, const std::string& what) {
  // Every job ends (its deadline passes at the latest); wait up to 30 s for it.
  const auto until = Clock::now() + 30s;
  while (pg.scalar("SELECT count(*) FROM sandglass_jobs WHERE state <> 'done'") != "0" && Clock::now() < until) {
    std::this_thread::sleep_for(20ms);
  }
  const auto q = pg.query(
      "SELECT count(*) FILTER (WHERE claimed_at > deadline),"
      " count(*) FILTER (WHERE run_us >= 0 AND finished_at - run_us * interval '1 microsecond' > deadline),"
      " count(*) FILTER (WHERE state <> 'done'), count(*),"
      " (SELECT count(*) FROM (SELECT id FROM bench_outcome_log GROUP BY id HAVING count(*) > 1) d),"
      " (SELECT count(*) FROM bench_outcome_log)"
      " FROM sandglass_jobs");
  std::printf("%s, by the database's clock over %s jobs: claimed after the deadline %s; started "
              "after it (finished_at - run_us, an upper bound) %s; jobs with more than one outcome "
              "write %s (%s writes logged); not ended %s\n",
              what.c_str(), q[0][3].c_str(), q[0][0].c_str(), q[0][1].c_str(), q[0][4].c_str(),
              q[0][5].c_str(), q[0][2].c_str());
}

// The goodput / wasted-work sweep of the HTTP mode (http_driver.hpp) against the cluster's
// nodes at once: capacity measured closed loop over all nodes, then the loads of `o`.
int overload_sweep(Cluster& c, const Options& o) {
  reset_queue(c.pg);
  log_outcome_writes(c.pg);
  Options h = o;
  h.cluster_nodes = 0;
  h.target.clear();
  for (const auto& n : c.nodes) h.target += (h.target.empty() ? "" : ",") + fmt::format("http://127.0.0.1:{}", n->port());
  h.workers = o.workers * c.nodes.size();
  std::printf("\n# overload of the %zu-node cluster (%zu workers each; nodes' [runtime] estimate_window "
              "1024, estimate_max_age_ms 3000, estimate_quantile %g): --target %s\n", c.nodes.size(),
              o.workers, c.estimate_quantile, h.target.c_str());
  std::fflush(stdout);
  statement_times(c.pg, 0);
  const int rc = run_http(h);
  std::fflush(stdout);
  if (o.verbose) {
    // Cumulative over the node's life (the capacity measurement included).
    const auto wait = node_buckets(c, "sandglass_cluster_intake_wait_seconds");
    const auto stmt = node_buckets(c, "sandglass_cluster_intake_statement_seconds");
    const auto size = node_buckets(c, "sandglass_cluster_intake_batch_size");
    std::printf("    intake (all nodes, since start): wait for the statement p50 <= %.1f ms, p99 <= %.1f "
                "ms; statement p50 <= %.1f ms, p99 <= %.1f ms; submissions per statement p50 <= %.0f, "
                "p99 <= %.0f (histogram bounds)\n",
                bucket_quantile(wait, 0.5), bucket_quantile(wait, 0.99), bucket_quantile(stmt, 0.5),
                bucket_quantile(stmt, 0.99), bucket_quantile(size, 0.5) / 1000, bucket_quantile(size, 0.99) / 1000);
    std::printf("    statements (pg_stat_statements, nested included):\n%s", statement_times(c.pg, 25).c_str());
    // Per second of the sweep (capacity, then each load), by the database's clock: how busy the
    // workers were (run time of the jobs that ended in that second ÷ workers), the jobs claimed,
    // their wait from insert to claim, those retired unclaimed, and the central estimate the
    // admission counted against the mean run time.
    const auto rows = c.pg.query(fmt::format(
        "WITH t0 AS (SELECT min(created_at) AS t FROM sandglass_jobs) "
        "SELECT s, round(sum(run_us) FILTER (WHERE fs = s) / 1e6 / {}, 3), count(*) FILTER (WHERE cs = s), "
        "round(avg(wait_ms) FILTER (WHERE cs = s)), count(*) FILTER (WHERE fs = s AND reason = 'too_late_to_start'), "
        "round(avg(work_us) FILTER (WHERE cs = s) / 1000.0, 1), round(avg(run_us) FILTER (WHERE fs = s AND reason = 'ok') / 1000.0, 1) "
        "FROM (SELECT floor(extract(epoch FROM finished_at - t0.t))::int AS fs, "
        "             floor(extract(epoch FROM claimed_at - t0.t))::int AS cs, "
        "             extract(epoch FROM claimed_at - created_at) * 1000 AS wait_ms, run_us, reason, work_us "
        "        FROM sandglass_jobs, t0) j, generate_series(0, 20) s GROUP BY s ORDER BY s",
        o.workers * c.nodes.size()));
    // The jobs cut at their deadline while running (wasted work): how much time each had left
    // at its claim, how long it then waited on its node before it started (claimed ahead, or a
    // worker not yet free), how long it ran until the cut, and the tail the claim checked.
    const auto cut = c.pg.query(
        "SELECT count(*), round(min(left_ms)), round(avg(left_ms)), round(max(left_ms)), "
        "round(avg(start_ms)), round(max(start_ms)), round(avg(run_us) / 1000.0), "
        "round(avg(work_us) / 1000.0, 1) FROM ("
        "  SELECT extract(epoch FROM deadline - claimed_at) * 1000 AS left_ms,"
        "         extract(epoch FROM finished_at - claimed_at) * 1000 - run_us / 1000.0 AS start_ms,"
        "         run_us, work_us FROM sandglass_jobs"
        "   WHERE outcome_state = 'cancelled' AND cause = 'deadline') j");
    if (!cut.empty() && cut[0].size() >= 8) {
      std::printf("    cut at the deadline while running: %s jobs; left at the claim min %s avg %s max %s ms; "
                  "claim -> start avg %s max %s ms (upper bounds); ran %s ms on average (mean run "
                  "estimate at admission %s ms)\n",
                  cut[0][0].c_str(), cut[0][1].c_str(), cut[0][2].c_str(), cut[0][3].c_str(),
                  cut[0][4].c_str(), cut[0][5].c_str(), cut[0][6].c_str(), cut[0][7].c_str());
    }
    std::printf("    per second: s busy claimed wait_ms retired work_ms run_ms\n");
    for (const auto& r : rows) {
      if (r.size() >= 7 && r[2] != "0") {
        std::printf("    %s %s %s %s %s %s %s\n", r[0].c_str(), r[1].c_str(), r[2].c_str(), r[3].c_str(),
                    r[4].c_str(), r[5].c_str(), r[6].c_str());
      }
    }
  }
  print_deadline_and_duplicates(c.pg, "overload sweep");
  return rc;
}

}  // namespace

int run_cluster(const Options& o) {
  if (o.sandglassd_path.empty()) {
    std::fprintf(stderr, "sandglass-overload: --cluster needs --sandglassd PATH\n");
    return 2;
  }
  try {
    Postgres pg;
    Cluster c{pg, o.sandglassd_path, o.workers, o.estimate_quantile, {}};
    const std::size_t jobs = o.smoke ? 500 : 20'000;
    int rc = 0;
    std::printf("# %s\n# load average at the start: %s\n", o.command_line.c_str(), load_average().c_str());
    const auto step = [&o](std::string_view name) {
      return std::find(o.cluster_steps.begin(), o.cluster_steps.end(), name) != o.cluster_steps.end();
    };
    c.add();
    if (step("idle")) idle_latency(c);
    if (step("claims")) claim_latency(c, 8, o.smoke ? 20 : 500, 8, 625, o.verbose);
    if (step("commits")) commit_points(c, o.smoke ? 16 : 400);
    if (step("throughput")) {
      // The throughput step offers its 20,000 jobs at once, a queue that stands for seconds:
      // the standing-queue rule would refuse most of them (rightly: under it they could never
      // start within the target). It measures how many jobs the nodes move, so its nodes hold
      // the rule off with a target longer than the step; the other steps' nodes keep the
      // adaptive default.
      c.stop_all();
      c.extra_config = "[admission]\nqueue_delay_target_ms = 3600000\n";
      for (std::size_t k = 1; k <= o.cluster_nodes; ++k) {
        while (c.nodes.size() < k) c.add();
        throughput(c, jobs, 64, o.verbose);
      }
      c.stop_all();
      c.extra_config.clear();
    }
    while (c.nodes.size() < o.cluster_nodes) c.add();
    if (step("overload")) rc = overload_sweep(c, o);
    if (c.nodes.size() >= 2 && (step("cancel") || step("recovery"))) {
      reset_queue(c.pg);
      log_outcome_writes(c.pg);
      if (step("cancel")) cancel_latency(c, o.smoke ? 5 : 50);
      if (step("recovery")) recovery(c, o.smoke ? 1 : 3);
      print_deadline_and_duplicates(pg, "cancel and kill -9 rounds");
    }
    c.stop_all();
    std::printf("# load average at the end: %s\n", load_average().c_str());
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sandglass-overload --cluster: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace sandglass::bench
