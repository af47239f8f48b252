#include "cluster_chaos.hpp"

#include "cluster_setup.hpp"

#include <fmt/format.h>

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace sandglass::bench {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kClients = 12;
constexpr auto kBackOff = std::chrono::milliseconds{100};  // a client's pause after a refusal or a broken connection
// Slack after a stopped node's SIGCONT during which a take-back of its rows is still its pause's
// (its lease ran out while it was stopped; the sweep may come a beat later).
constexpr auto kStopSlack = std::chrono::milliseconds{Cluster::kLeaseMs + 1000};

double wall_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The ledger the `sql` kind writes at its commit point, and the bench's log of take-backs: a
// row leaving `running` for `queued` or a new claim, or ending node_lost, with the owner it left.
void create_chaos_tables(Postgres& pg) {
  pg.query(
      "CREATE TABLE chaos_ledger (note text, at timestamptz DEFAULT clock_timestamp());"
      "CREATE TABLE chaos_takebacks (id bigint, owner text, at timestamptz DEFAULT clock_timestamp(), "
      "  node_lost boolean);"
      "CREATE TABLE chaos_faults (node text, since double precision, until double precision);"
      "CREATE FUNCTION chaos_log_takeback() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
      " IF OLD.state = 'running' AND (NEW.state = 'queued' OR NEW.attempt <> OLD.attempt"
      "     OR (NEW.state = 'done' AND NEW.reason = 'node_lost')) THEN"
      "   INSERT INTO chaos_takebacks (id, owner, node_lost) VALUES (OLD.id, OLD.owner, NEW.state = 'done');"
      " END IF; RETURN NEW; END $$;"
      "CREATE TRIGGER chaos_log_takeback AFTER UPDATE ON sandglass_jobs FOR EACH ROW"
      " EXECUTE FUNCTION chaos_log_takeback();"
      "CREATE OR REPLACE FUNCTION bench_log_outcome() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
      " IF NEW.state = 'done' AND OLD.state <> 'done' THEN"
      "   INSERT INTO bench_outcome_log VALUES (NEW.id, NEW.attempt, NEW.owner); END IF;"
      " RETURN NEW; END $$;"
      "CREATE TRIGGER bench_log_outcome AFTER UPDATE ON sandglass_jobs FOR EACH ROW"
      " EXECUTE FUNCTION bench_log_outcome();");
}

// The nodes' [records] (kept for the whole run, so every row can be counted at the end) and the
// `sql` kind: `record` sleeps up to 300 ms on the server, then inserts its note; it passes its
// commit point after the insert, before the COMMIT.
std::string chaos_config(const Postgres& pg) {
  return fmt::format(
      "[records]\nkeep_ms = 86400000\nmax_count = 10000000\n"
      "[databases.main]\nconninfo = \"{}\"\npool_size = 4\n"
      "[queries.record]\ndatabase = \"main\"\n"
      "sql = \"INSERT INTO chaos_ledger (note) SELECT $1::text FROM pg_sleep(random() * 0.3)\"\n"
      "params = 1\ncommits = true\n",
      pg.conninfo());
}

// The ports of the live nodes, read by the client threads, changed by the fault thread.
class LivePorts {
 public:
  void set(std::vector<std::uint16_t> ports) {
    std::lock_guard lock{mu_};
    ports_ = std::move(ports);
  }
  std::uint16_t pick(std::mt19937_64& rng, std::uint16_t avoid) const {
    std::lock_guard lock{mu_};
    if (ports_.empty()) return 0;
    std::uint16_t p = ports_[rng() % ports_.size()];
    if (p == avoid && ports_.size() > 1) p = ports_[(std::find(ports_.begin(), ports_.end(), p) - ports_.begin() + 1) % ports_.size()];
    return p;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::uint16_t> ports_;  // guarded by mu_
};

struct Answered {
  std::uint64_t id;
  std::string state;
};

// What the clients saw. Each client thread writes its own slot; read after they joined.
struct ClientLog {
  std::size_t sent = 0;          // requests (a keyed retry counts again)
  std::size_t answered = 0;      // answers with a record (an id and a state)
  std::size_t refused = 0;       // answers without a record (4xx/5xx at intake)
  std::map<int, std::size_t> refused_by_status;
  std::size_t broken = 0;        // connections that broke before an answer
  std::size_t keyed_retries = 0;
  std::vector<Answered> records;
  std::atomic<bool> waiting{false};  // a request sent, its answer not yet in
};

std::string field(const std::string& body, const std::string& name) {
  const std::string key = "\"" + name + "\":\"";
  const auto at = body.find(key);
  if (at == std::string::npos) return {};
  return body.substr(at + key.size(), body.find('"', at + key.size()) - at - key.size());
}

void client_loop(std::size_t index, const LivePorts& ports, const std::atomic<bool>& stop, ClientLog& log) {
  static const char* const kClasses[] = {"critical", "high", "normal", "sheddable"};
  std::mt19937_64 rng{0x5eed + index};
  std::map<std::uint16_t, std::unique_ptr<Client>> clients;
  for (std::size_t n = 0; !stop.load(); ++n) {
    const std::string note = fmt::format("c{}-{}", index, n);
    const bool sql = rng() % 5 < 2;
    const bool keyed = rng() % 4 == 0;
    const std::string args = sql ? fmt::format(R"({{"query":"record","params":["{}"]}})", note)
                                 : fmt::format(R"({{"ms":{}}})", 10 + rng() % 1500);
    const std::string body = fmt::format(
        R"({{"kind":"{}","args":{},"priority":"{}","timeout_ms":{}{}}})", sql ? "sql" : "sleep", args,
        kClasses[rng() % 4], 200 + rng() % 9800, keyed ? fmt::format(R"(,"idempotency_key":"{}")", note) : "");
    std::uint16_t last = 0;
    for (int attempt = 0; attempt < (keyed ? 3 : 1); ++attempt) {
      const std::uint16_t port = ports.pick(rng, last);
      if (port == 0) break;
      last = port;
      if (attempt > 0) ++log.keyed_retries;
      ++log.sent;
      log.waiting.store(true);
      std::optional<std::pair<int, std::string>> answer;
      try {
        auto& c = clients[port];
        if (!c) c = std::make_unique<Client>(port);
        answer = c->request("POST", "/v1/jobs", body);
      } catch (const std::exception&) {
        clients.erase(port);
        ++log.broken;
      }
      log.waiting.store(false);
      if (!answer) {  // broken: a keyed request is sent again, a moment later
        std::this_thread::sleep_for(kBackOff);
        continue;
      }
      const std::uint64_t id = id_in(answer->second);
      const std::string state = field(answer->second, "state");
      if (id != 0 && !state.empty() && state != "queued" && state != "running") {
        ++log.answered;
        log.records.push_back({id, state});
        break;
      }
      ++log.refused;
      ++log.refused_by_status[answer->first];
      std::this_thread::sleep_for(kBackOff);  // a refusing cluster (a database outage) is not hammered
      if (answer->first < 500) break;  // a 4xx is the answer; a 5xx without a record may be retried
    }
  }
}

struct FaultCounts {
  int kills = 0;
  int stops = 0;
  int db_restarts = 0;
  std::vector<double> recovery_ms;  // per kill -9 that left held jobs: until none is held
  int kills_holding_nothing = 0;
  // Per PostgreSQL restart: from the database accepting connections again until every node
  // answers a read of a job from it (any status but 503).
  std::vector<double> intake_back_ms;
};

// Everything the run counts at the end; `correct()` when all correctness counts are zero.
struct ChaosCounts {
  std::string jobs, ledger_doubles, not_ended, outcome_doubles, claimed_late, started_late_bound;
  std::string take_backs, take_backs_live, node_lost, node_lost_live;
  std::size_t answer_mismatch = 0, left_waiting = 0;
  std::size_t unanswered = 0;  // rows no client was answered about (not a correctness count)
  bool correct() const {
    return ledger_doubles == "0" && not_ended == "0" && outcome_doubles == "0" && claimed_late == "0" &&
           take_backs_live == "0" && node_lost_live == "0" && answer_mismatch == 0 && left_waiting == 0;
  }
};

class Chaos {
 public:
  Chaos(Postgres& pg, Cluster& c, std::uint64_t seed) : pg_{pg}, c_{c}, rng_{seed} {}

  // Injects one random fault, each type once in every three in a random order; returns when it
  // is over (a stopped node resumed, the database is back, a killed node's jobs ran again and it
  // was restarted).
  void inject() {
    if (bag_.empty()) {
      bag_ = {0, 1, 2};
      std::shuffle(bag_.begin(), bag_.end(), rng_);
    }
    const int pick = bag_.back();
    bag_.pop_back();
    if (pick == 0) kill_and_restart();
    else if (pick == 1) stop_and_resume();
    else restart_database();
  }
  void publish_ports() {
    std::vector<std::uint16_t> p;
    for (const auto& n : c_.nodes) p.push_back(n->port());
    ports.set(std::move(p));
  }
  // Writes the fault windows into chaos_faults: a killed node's from its kill on, a stopped
  // node's until kStopSlack after SIGCONT. A database restart is no node's fault: it opens none.
  void save_windows() {
    for (const auto& [node, since, until] : windows_) {
      pg_.query(fmt::format("INSERT INTO chaos_faults VALUES ('{}', {:.6f}, {:.6f})", node, since, until));
    }
  }

  LivePorts ports;
  FaultCounts counts;

 private:
  std::size_t victim() { return rng_() % c_.nodes.size(); }

  void kill_and_restart() {
    const std::size_t i = victim();
    const std::string name = Cluster::node_name(*c_.nodes[i]);
    c_.nodes[i]->signal(SIGKILL);
    const auto t0 = Clock::now();
    windows_.push_back({name, wall_now(), 1e12});
    ++counts.kills;
    c_.nodes[i]->wait_exit(10s);
    c_.nodes.erase(c_.nodes.begin() + static_cast<std::ptrdiff_t>(i));
    publish_ports();
    const std::string held = "SELECT count(*) FROM sandglass_jobs WHERE state = 'running' AND owner LIKE '" + name + "/%'";
    if (pg_.scalar(held) == "0") {
      ++counts.kills_holding_nothing;
    } else {
      while (pg_.scalar(held) != "0" && Clock::now() - t0 < 60s) std::this_thread::sleep_for(10ms);
      counts.recovery_ms.push_back(ms_between(t0, Clock::now()));
    }
    c_.add();
    publish_ports();
  }
  void stop_and_resume() {
    const std::size_t i = victim();
    const std::string name = Cluster::node_name(*c_.nodes[i]);
    const auto pause = std::chrono::milliseconds{2 * Cluster::kLeaseMs + static_cast<int>(rng_() % Cluster::kLeaseMs)};
    const double since = wall_now();
    c_.nodes[i]->signal(SIGSTOP);
    ++counts.stops;
    std::this_thread::sleep_for(pause);
    c_.nodes[i]->signal(SIGCONT);
    windows_.push_back({name, since, wall_now() + std::chrono::duration<double>(kStopSlack).count()});
  }
  void restart_database() {
    const auto down = std::chrono::milliseconds{1000 + rng_() % 9000};
    ++counts.db_restarts;
    pg_.restart(down);
    const auto back = Clock::now();
    for (const auto& node : c_.nodes) wait_until_answering(node->port(), back + 30s);
    counts.intake_back_ms.push_back(ms_between(back, Clock::now()));
  }
  // Until the node at `port` answers GET /v1/jobs/1 from the database (200 or 404, not 503),
  // or `until`.
  static void wait_until_answering(std::uint16_t port, Clock::time_point until) {
    while (Clock::now() < until) {
      try {
        Client client{port};
        if (client.request("GET", "/v1/jobs/1").first != 503) return;
      } catch (const std::exception&) {
        // not answering yet
      }
      std::this_thread::sleep_for(10ms);
    }
  }

  struct Window {
    std::string node;
    double since, until;
  };
  Postgres& pg_;
  Cluster& c_;
  std::mt19937_64 rng_;
  std::vector<Window> windows_;
  std::vector<int> bag_;  // the fault types still to come in this round of three
};

// Every row ends by its deadline at the latest: waits up to a minute for none to be left.
void wait_all_ended(Postgres& pg) {
  const auto until = Clock::now() + 60s;
  while (pg.scalar("SELECT count(*) FROM sandglass_jobs WHERE state <> 'done'") != "0" && Clock::now() < until) {
    std::this_thread::sleep_for(50ms);
  }
}

ChaosCounts count_outcomes(Postgres& pg, const std::vector<std::unique_ptr<ClientLog>>& logs, std::size_t left_waiting) {
  ChaosCounts k;
  k.left_waiting = left_waiting;
  const auto q = pg.query(
      "SELECT count(*), count(*) FILTER (WHERE state <> 'done'),"
      " count(*) FILTER (WHERE claimed_at > deadline),"
      " count(*) FILTER (WHERE run_us >= 0 AND finished_at - run_us * interval '1 microsecond' > deadline),"
      " (SELECT count(*) FROM (SELECT id FROM bench_outcome_log GROUP BY id HAVING count(*) > 1) d),"
      " (SELECT count(*) FROM (SELECT note FROM chaos_ledger GROUP BY note HAVING count(*) > 1) d)"
      " FROM sandglass_jobs");
  k.jobs = q[0][0];
  k.not_ended = q[0][1];
  k.claimed_late = q[0][2];
  k.started_late_bound = q[0][3];
  k.outcome_doubles = q[0][4];
  k.ledger_doubles = q[0][5];
  // A take-back is a fault's when its owner's node was killed or stopped then; any other (also
  // one during or after a database restart) is from a live node.
  const auto t = pg.query(
      "SELECT count(*) FILTER (WHERE NOT node_lost), count(*) FILTER (WHERE NOT node_lost AND NOT faulted),"
      " count(*) FILTER (WHERE node_lost), count(*) FILTER (WHERE node_lost AND NOT faulted) FROM ("
      "  SELECT t.node_lost, EXISTS (SELECT 1 FROM chaos_faults f WHERE split_part(t.owner, '/', 1) = f.node"
      "    AND extract(epoch FROM t.at) BETWEEN f.since AND f.until) AS faulted FROM chaos_takebacks t) d");
  k.take_backs = t[0][0];
  k.take_backs_live = t[0][1];
  k.node_lost = t[0][2];
  k.node_lost_live = t[0][3];
  std::map<std::uint64_t, std::string> db;
  for (const auto& r : pg.query("SELECT id, outcome_state FROM sandglass_jobs")) db[std::stoull(r[0])] = r[1];
  std::map<std::uint64_t, bool> answered;
  for (const auto& log : logs) {
    for (const auto& a : log->records) {
      const auto it = db.find(a.id);
      if (it == db.end() || it->second != a.state) ++k.answer_mismatch;
      answered[a.id] = true;
    }
  }
  for (const auto& [id, state] : db) k.unanswered += answered.contains(id) ? 0 : 1;
  return k;
}

void report(const Options& o, const FaultCounts& f, const ChaosCounts& k,
            const std::vector<std::unique_ptr<ClientLog>>& logs) {
  ClientLog sum;
  for (const auto& l : logs) {
    sum.sent += l->sent;
    sum.answered += l->answered;
    sum.refused += l->refused;
    sum.broken += l->broken;
    sum.keyed_retries += l->keyed_retries;
    for (const auto& [status, n] : l->refused_by_status) sum.refused_by_status[status] += n;
  }
  std::string by_status;
  for (const auto& [status, n] : sum.refused_by_status) by_status += fmt::format("{}{}: {}", by_status.empty() ? "" : ", ", status, n);
  const double rec_p50 = quantile(f.recovery_ms, 0.5), rec_max = quantile(f.recovery_ms, 1.0);
  const double back_p50 = quantile(f.intake_back_ms, 0.5), back_max = quantile(f.intake_back_ms, 1.0);
  std::printf("faults injected: kill -9 %d (%d held no job), SIGSTOP %d, PostgreSQL restart %d\n", f.kills,
              f.kills_holding_nothing, f.stops, f.db_restarts);
  std::printf("requests %zu (keyed retries %zu): answered with a record %zu, refused %zu (%s), connection "
              "broken %zu\n",
              sum.sent, sum.keyed_retries, sum.answered, sum.refused, by_status.c_str(), sum.broken);
  std::printf("jobs in the database %s, of them answered to no client %zu (their connection broke)\n", k.jobs.c_str(),
              k.unanswered);
  std::printf("runs past a commit point twice (ledger rows per job > 1): %s\n", k.ledger_doubles.c_str());
  std::printf("jobs without exactly one terminal outcome: not ended %s, more than one outcome write %s, "
              "client answers differing from the row %zu\n",
              k.not_ended.c_str(), k.outcome_doubles.c_str(), k.answer_mismatch);
  std::printf("claimed after the deadline (database clock) %s; finished_at - run_us after it (an upper bound "
              "of the start, not a correctness count) %s\n",
              k.claimed_late.c_str(), k.started_late_bound.c_str());
  std::printf("take-backs (requeued or reclaimed) %s, from live nodes %s; node_lost %s, from live nodes %s "
              "(by a trigger on the rows against the fault windows; a stopped node's window ends %lld ms "
              "after SIGCONT)\n",
              k.take_backs.c_str(), k.take_backs_live.c_str(), k.node_lost.c_str(), k.node_lost_live.c_str(),
              static_cast<long long>(kStopSlack.count()));
  std::printf("clients left waiting: %zu\n", k.left_waiting);
  std::printf("recovery after kill -9 (until no row is held by the killed node), %zu kills: p50 %.0f ms, "
              "max %.0f ms (lease_ms %d)\n",
              f.recovery_ms.size(), rec_p50, rec_max, Cluster::kLeaseMs);
  std::printf("intake back after a PostgreSQL restart of 1-10 s (from the database accepting connections until "
              "every node answers a read from it), %zu restarts: p50 %.0f ms, max %.0f ms\n",
              f.intake_back_ms.size(), back_p50, back_max);
  std::printf("correctness: %s\n", k.correct() ? "ok" : "FAILED");
  if (o.json_path.empty()) return;
  std::ofstream{o.json_path} << fmt::format(
      "{{\"command\":\"{}\",\"faults\":{{\"kill\":{},\"kill_holding_nothing\":{},\"sigstop\":{},\"db_restart\":{}}},"
      "\"requests\":{},\"unanswered_jobs\":{},\"answered\":{},\"refused\":{},\"broken\":{},\"keyed_retries\":{},\"jobs\":{},"
      "\"ledger_doubles\":{},\"not_ended\":{},\"outcome_doubles\":{},\"answer_mismatch\":{},"
      "\"claimed_after_deadline\":{},\"started_after_deadline_bound\":{},\"take_backs\":{},"
      "\"take_backs_from_live\":{},\"node_lost\":{},\"node_lost_from_live\":{},\"clients_left_waiting\":{},"
      "\"recovery_ms\":{{\"count\":{},\"p50\":{:.0f},\"max\":{:.0f}}},"
      "\"intake_back_ms\":{{\"count\":{},\"p50\":{:.0f},\"max\":{:.0f}}},\"lease_ms\":{},\"correct\":{}}}\n",
      o.command_line, f.kills, f.kills_holding_nothing, f.stops, f.db_restarts, sum.sent, k.unanswered, sum.answered,
      sum.refused, sum.broken, sum.keyed_retries, k.jobs, k.ledger_doubles, k.not_ended, k.outcome_doubles,
      k.answer_mismatch, k.claimed_late, k.started_late_bound, k.take_backs, k.take_backs_live, k.node_lost,
      k.node_lost_live, k.left_waiting, f.recovery_ms.size(), rec_p50, rec_max, f.intake_back_ms.size(), back_p50,
      back_max, Cluster::kLeaseMs,
      k.correct() ? "true" : "false");
}

}  // namespace

int run_cluster_chaos(const Options& o) {
  try {
    Postgres pg;
    Cluster c{pg, o.sandglassd_path, o.workers, o.estimate_quantile, {}, chaos_config(pg)};
    std::printf("# %s\n", o.command_line.c_str());
    while (c.nodes.size() < std::max<std::size_t>(o.cluster_nodes, 2)) c.add();
    create_chaos_tables(pg);
    Chaos chaos{pg, c, o.seed};
    chaos.publish_ports();
    std::atomic<bool> stop{false};
    std::vector<std::unique_ptr<ClientLog>> logs;
    std::vector<std::future<void>> clients;
    for (std::size_t i = 0; i < kClients; ++i) {
      logs.push_back(std::make_unique<ClientLog>());
      clients.push_back(std::async(std::launch::async, client_loop, i, std::cref(chaos.ports), std::cref(stop),
                                   std::ref(*logs.back())));
    }
    std::mt19937_64 rng{o.seed};
    const auto end = Clock::now() + o.cluster_chaos;
    while (Clock::now() + 10s < end) {
      std::this_thread::sleep_for(std::chrono::milliseconds{8000 + rng() % 4000});
      chaos.inject();
      std::fflush(stdout);
    }
    std::this_thread::sleep_until(end);
    stop.store(true);
    // Every answer is due by its budget (at most 10 s) and the reserve; a client still waiting
    // long after that was left waiting.
    const auto answers_due = Clock::now() + 30s;
    for (auto& f : clients) f.wait_until(answers_due);
    std::size_t left_waiting = 0;
    for (const auto& l : logs) left_waiting += l->waiting.load() ? 1 : 0;
    wait_all_ended(pg);
    c.stop_all();  // ends the connections of clients left waiting
    for (auto& f : clients) f.get();
    chaos.save_windows();
    const ChaosCounts counts = count_outcomes(pg, logs, left_waiting);
    report(o, chaos.counts, counts, logs);
    return counts.correct() ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sandglass-overload --cluster-chaos: %s\n", e.what());
    return 1;
  }
}

}  // namespace sandglass::bench
