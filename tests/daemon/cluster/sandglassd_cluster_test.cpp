// Cluster mode end to end: three (or more) real sandglassd share one queue in a real
// PostgreSQL. Each test case runs in its own process with its own database server.
#include "cluster/cluster_fixture.hpp"

#include <doctest/doctest.h>

#include <signal.h>

#include <future>
#include <set>
#include <thread>

using namespace sandglass::testing;
using namespace std::chrono_literals;

TEST_SUITE("cluster") {

TEST_CASE("a job submitted on one node runs on the node that serves its kind, and its waiter is answered" *
          doctest::timeout(120)) {
  ClusterFixture c;
  DaemonProcess& a = c.node({"sleep"});
  DaemonProcess& b = c.node({"spin"});
  DaemonProcess& n3 = c.node({"sleep"});

  const HttpAnswer spun = post_job(a.port(), R"({"kind":"spin","args":{"ms":20},"priority":"high"})");
  REQUIRE(spun.status == 200);
  const auto spin = json_of(spun);
  CHECK(text(spin, "state") == "completed");
  CHECK(text(spin, "node") == ClusterFixture::name_of(b));
  CHECK(spin.at("attempt").as_int64() == 1);
  // Every node reads it from the database and names the node that ran it.
  CHECK(text(record(n3.port(), id_of(spun)), "node") == ClusterFixture::name_of(b));

  // A mixed load from all three nodes at once: two kinds, four classes, several budgets; each
  // waiter gets its own job's outcome, run by a node that serves the kind.
  struct Sent {
    std::string kind;
    std::future<HttpAnswer> answer;
  };
  std::vector<Sent> sent;
  const char* priorities[] = {"critical", "high", "normal", "sheddable"};
  for (int i = 0; i < 24; ++i) {
    const std::uint16_t port = c.nodes[static_cast<std::size_t>(i % 3)]->port();
    const std::string kind = i % 4 == 0 ? "spin" : "sleep";
    const std::string body = fmt::format(R"({{"kind":"{}","args":{{"ms":{}}},"priority":"{}","timeout_ms":{}}})",
                                         kind, 5 + i % 7, priorities[i % 4], 5'000 + 1'000 * (i % 5));
    sent.push_back({kind, std::async(std::launch::async, [port, body] { return post_job(port, body); })});
  }
  std::set<std::uint64_t> ids;
  for (Sent& s : sent) {
    const HttpAnswer answer = s.answer.get();
    REQUIRE(answer.status == 200);
    const auto o = json_of(answer);
    CHECK(text(o, "state") == "completed");
    CHECK(text(o, "kind") == s.kind);
    if (s.kind == "spin") {
      CHECK(text(o, "node") == ClusterFixture::name_of(b));
    } else {
      CHECK(text(o, "node") != ClusterFixture::name_of(b));
    }
    ids.insert(o.at("id").to_number<std::uint64_t>());
  }
  CHECK(ids.size() == sent.size());
  CHECK(c.pg.scalar("SELECT count(*) FROM sandglass_jobs WHERE state <> 'done'") == "0");
  // Admission counters match the queue: nothing queued.
  CHECK(c.pg.scalar("SELECT coalesce(sum(queued), 0) FROM sandglass_counters") == "0");
  CHECK(metric(b.port(), "sandglass_cluster_claimed_jobs_total") >= 7);
}

TEST_CASE("a job of a kind no node serves expires in the queue and its waiter is told" *
          doctest::timeout(60)) {
  ClusterFixture c;
  DaemonProcess& a = c.node({"sleep"});
  const HttpAnswer r = post_job(a.port(), R"({"kind":"spin","args":{"ms":1},"timeout_ms":300})");
  CHECK(r.status == 504);
  const auto o = json_of(r);
  CHECK(text(o, "state") == "expired");
  CHECK(text(o, "reason") == "expired_in_queue");
  CHECK(o.at("node").is_null());  // it never ran anywhere
}

TEST_CASE("kill -9 of the node running a job: another node claims it again within the lease" *
          doctest::timeout(120)) {
  ClusterFixture c;
  c.node({"sleep"});
  c.node({"spin"});
  c.node({"sleep"});
  const std::uint16_t entry = c.nodes[1]->port();
  const std::uint64_t id = submit_later(entry, R"({"kind":"sleep","args":{"ms":1500},"timeout_ms":20000})");
  REQUIRE(eventually([&] { return text(record(entry, id), "state") == "running"; }));
  const std::string first = text(record(entry, id), "node");
  DaemonProcess* runner = c.by_name(first);
  REQUIRE(runner != nullptr);
  runner->signal(SIGKILL);
  REQUIRE(runner->wait_exit(10s).has_value());

  REQUIRE(eventually([&] { return text(record(entry, id), "state") == "completed"; }, 30s));
  const auto o = record(entry, id);
  CHECK(o.at("attempt").as_int64() == 2);
  CHECK(text(o, "node") != first);
  CHECK(text(o, "node") != ClusterFixture::name_of(*c.nodes[1]));
  const std::string survivor = text(o, "node");
  CHECK(metric(c.by_name(survivor)->port(), "sandglass_cluster_reclaimed_total") +
            metric(entry, "sandglass_cluster_reclaimed_total") ==
        1);
}

TEST_CASE("kill -9 after a job's commit point ends it node_lost, it never runs again" *
          doctest::timeout(120)) {
  ClusterFixture c;
  c.node({"sleep"});
  c.node({"spin"});
  c.node({"sleep"});
  const std::uint16_t entry = c.nodes[1]->port();
  const std::uint64_t id =
      submit_later(entry, R"({"kind":"sleep","args":{"ms":5000,"commit_at_ms":20},"timeout_ms":20000})");
  // The commit point reaches the database (the record says committed) while the job runs.
  REQUIRE(eventually([&] {
    const auto o = record(entry, id);
    return text(o, "state") == "running" && o.at("committed").as_bool();
  }));
  DaemonProcess* runner = c.by_name(text(record(entry, id), "node"));
  REQUIRE(runner != nullptr);
  runner->signal(SIGKILL);
  REQUIRE(runner->wait_exit(10s).has_value());

  REQUIRE(eventually([&] { return text(record(entry, id), "state") == "failed"; }, 30s));
  const auto o = record(entry, id);
  CHECK(text(o, "reason") == "node_lost");
  CHECK(o.at("attempt").as_int64() == 1);
  CHECK(o.at("committed").as_bool());
  CHECK(http(entry, "GET", "/v1/jobs/" + std::to_string(id)).status == 200);
}

TEST_CASE("keyed jobs under repeated kill -9 get exactly one outcome each, and retries attach" *
          doctest::timeout(240)) {
  ClusterFixture c;
  // Every change of a job to its outcome, logged by the database itself.
  c.node({"spin"});  // the entry node; it never runs sleep jobs
  c.node({"sleep"}, 4);
  c.node({"sleep"}, 4);
  c.log_outcomes();
  const std::uint16_t entry = c.nodes[0]->port();
  constexpr int kJobs = 30;
  std::map<std::string, std::uint64_t> id_by_key;
  for (int i = 0; i < kJobs; ++i) {
    const std::string key = "order-" + std::to_string(i);
    const std::string body = fmt::format(
        R"({{"kind":"sleep","args":{{"ms":{}{}}},"idempotency_key":"{}","timeout_ms":15000,"priority":"{}"}})",
        100 + 37 * (i % 9), i % 3 == 0 ? R"(,"commit_at_ms":30)" : "", key,
        i % 2 == 0 ? "high" : "normal");
    id_by_key[key] = submit_later(entry, body);
  }
  // Three rounds: kill -9 a sleep node while it runs jobs, start a fresh one in its place.
  for (int round = 0; round < 3; ++round) {
    const std::size_t victim = 1 + static_cast<std::size_t>(round % 2);
    const std::string name = ClusterFixture::name_of(*c.nodes[victim]);
    REQUIRE(eventually([&] {
      return c.pg.scalar("SELECT count(*) FROM sandglass_jobs WHERE state = 'running' AND node_ran = '" +
                         name + "'") != "0" ||
             c.pg.scalar("SELECT count(*) FROM sandglass_jobs WHERE state <> 'done'") == "0";
    }));
    c.nodes[victim]->signal(SIGKILL);
    REQUIRE(c.nodes[victim]->wait_exit(10s).has_value());
    const std::string path = write_temp_file("cluster.toml", c.config({"sleep"}, 4));
    c.nodes[victim] = std::make_unique<DaemonProcess>(std::vector<std::string>{"--config", path});
  }
  // Retries of every key attach to the one job and wait for its outcome.
  for (const auto& [key, id] : id_by_key) {
    const std::string body = fmt::format(R"({{"kind":"sleep","args":{{"ms":{}{}}},"idempotency_key":"{}","timeout_ms":15000,"priority":"{}"}})",
        100 + 37 * (std::stoi(key.substr(6)) % 9), std::stoi(key.substr(6)) % 3 == 0 ? R"(,"commit_at_ms":30)" : "", key,
        std::stoi(key.substr(6)) % 2 == 0 ? "high" : "normal");
    const HttpAnswer a = post_job(c.nodes[1]->port(), body);
    const auto o = json_of(a);
    CHECK(o.at("id").to_number<std::uint64_t>() == id);
    const std::string state = text(o, "state");
    CHECK((state == "completed" || text(o, "reason") == "node_lost"));
  }
  CHECK(c.pg.scalar("SELECT count(*) FROM sandglass_jobs") == std::to_string(kJobs));
  CHECK(c.pg.scalar("SELECT count(*) FROM outcome_log") == std::to_string(kJobs));
  CHECK(c.pg.scalar("SELECT count(*) FROM (SELECT id FROM outcome_log GROUP BY id HAVING count(*) > 1) d") == "0");
  // A job lost after its commit point never ran again: node_lost keeps attempt of that run.
  CHECK(c.pg.scalar("SELECT count(*) FROM sandglass_jobs WHERE reason = 'node_lost' AND NOT committed "
                    "AND deadline > finished_at + interval '1 second'") == "0");
}

TEST_CASE("DELETE on one node cancels the job where it runs, cause caller" * doctest::timeout(120)) {
  ClusterFixture c;
  DaemonProcess& runner = c.node({"sleep"});
  DaemonProcess& other = c.node({"spin"});
  DaemonProcess& third = c.node({"spin"});
  // A waiter on `third`, the job on `runner`, the DELETE on `other`.
  auto waiter = std::async(std::launch::async, [&] {
    return post_job(third.port(), R"({"kind":"sleep","args":{"ms":20000},"idempotency_key":"long-1"})");
  });
  std::uint64_t id = 0;
  REQUIRE(eventually([&] {
    const std::string v = c.pg.scalar("SELECT coalesce(max(id), 0) FROM sandglass_jobs WHERE state = 'running'");
    id = std::stoull(v);
    return id != 0;
  }));
  CHECK(text(record(other.port(), id), "node") == ClusterFixture::name_of(runner));
  const HttpAnswer del = http(other.port(), "DELETE", "/v1/jobs/" + std::to_string(id));
  // The final record once the job ended within the DELETE's short wait, else "cancelling".
  CHECK((del.status == 200 || del.status == 202));
  CHECK(text(json_of(del), "state") == (del.status == 200 ? "cancelled" : "cancelling"));
  const HttpAnswer answered = waiter.get();
  CHECK(answered.status == 499);
  const auto o = json_of(answered);
  CHECK(text(o, "state") == "cancelled");
  CHECK(text(o, "reason") == "cancelled_while_running");
  CHECK(text(o, "cause") == "caller");
  CHECK(text(o, "node") == ClusterFixture::name_of(runner));
}

TEST_CASE("a DELETE that reaches the node before it has started the job it claimed still cancels it" *
          doctest::timeout(180)) {
  ClusterFixture c;
  DaemonProcess& n = c.node({"sleep"});
  // With a free worker and nothing queued, the node claims each job at insert and answers 202
  // before it starts the job; the DELETE follows at once, often before the start.
  for (int i = 0; i < 20; ++i) {
    const std::uint64_t id = submit_later(n.port(), R"({"kind":"sleep","args":{"ms":30000},"timeout_ms":60000})");
    http(n.port(), "DELETE", "/v1/jobs/" + std::to_string(id));
    REQUIRE(eventually([&] { return text(record(n.port(), id), "state") == "cancelled"; }));
    const auto o = record(n.port(), id);
    CHECK(text(o, "cause") == "caller");
    // Mostly claimed at insert and cancelled running; queued when the claimer held the free
    // worker at that moment (then the DELETE ends it in the queue).
    if (text(o, "reason") == "cancelled_while_running") {
      CHECK(text(o, "node") == ClusterFixture::name_of(n));
    } else {
      CHECK(text(o, "reason") == "cancelled_in_queue");
    }
  }
}

TEST_CASE("a waiting client that disconnects cancels its job on the node that runs it" *
          doctest::timeout(120)) {
  ClusterFixture c;
  DaemonProcess& runner = c.node({"sleep"});
  DaemonProcess& entry = c.node({"spin"});
  c.node({"spin"});
  Connection conn{entry.port()};
  conn.send(request_bytes("POST", "/v1/jobs", R"({"kind":"sleep","args":{"ms":20000}})"));
  std::uint64_t id = 0;
  REQUIRE(eventually([&] {
    id = std::stoull(c.pg.scalar("SELECT coalesce(max(id), 0) FROM sandglass_jobs WHERE state = 'running'"));
    return id != 0;
  }));
  conn.close();
  REQUIRE(eventually([&] { return text(record(runner.port(), id), "state") == "cancelled"; }));
  const auto o = record(runner.port(), id);
  CHECK(text(o, "cause") == "caller");
  CHECK(text(o, "node") == ClusterFixture::name_of(runner));
}

TEST_CASE("DELETE of a queued job ends it at once, on any node" * doctest::timeout(60)) {
  ClusterFixture c;
  DaemonProcess& a = c.node({"spin"});  // nobody serves sleep: it stays queued
  const std::uint64_t id = submit_later(a.port(), R"({"kind":"sleep","args":{"ms":10},"timeout_ms":30000})");
  CHECK(text(record(a.port(), id), "state") == "queued");
  const auto o = json_of(http(a.port(), "DELETE", "/v1/jobs/" + std::to_string(id)));
  CHECK(text(o, "state") == "cancelled");
  CHECK(text(o, "reason") == "cancelled_in_queue");
  CHECK(text(o, "cause") == "caller");
  CHECK(c.pg.scalar("SELECT coalesce(sum(queued), 0) FROM sandglass_counters") == "0");
}

TEST_CASE("cluster admission refuses work the cluster cannot finish in time, and a full queue" *
          doctest::timeout(120)) {
  ClusterFixture c;
  DaemonProcess& a = c.node({"sleep"}, 1);
  // Teach the estimates: sleep takes 200 ms.
  REQUIRE(post_job(a.port(), R"({"kind":"sleep","args":{"ms":200}})").status == 200);
  REQUIRE(post_job(a.port(), R"({"kind":"sleep","args":{"ms":200}})").status == 200);
  // Ten queued ahead on one worker: two seconds of work; a 1 s budget cannot make it.
  for (int i = 0; i < 10; ++i) submit_later(a.port(), R"({"kind":"sleep","args":{"ms":200},"timeout_ms":30000})");
  const HttpAnswer r = post_job(a.port(), R"({"kind":"sleep","args":{"ms":200},"timeout_ms":1000})");
  CHECK(r.status == 503);
  CHECK(text(json_of(r), "reason") == "deadline_implausible");
  CHECK(r.header("retry-after") == "1");
  // A critical job overtakes the normal ones: the work ahead of it is only the running one.
  const HttpAnswer critical = post_job(a.port(), R"({"kind":"sleep","args":{"ms":200},"timeout_ms":1500,"priority":"critical"})");
  CHECK(critical.status == 200);
  // queue_full: the cluster's capacity is the sum of the live nodes' runtime.capacity.
  c.pg.execute("UPDATE sandglass_nodes SET capacity = 1");
  const HttpAnswer full = post_job(a.port(), R"({"kind":"sleep","args":{"ms":1},"timeout_ms":30000})");
  CHECK(full.status == 503);
  CHECK(text(json_of(full), "reason") == "queue_full");
}

TEST_CASE("a budget shorter than the tail estimate is refused by the node itself, a keyed one asks the database" *
          doctest::timeout(120)) {
  ClusterFixture c;
  DaemonProcess& a = c.node({"sleep"}, 1);
  // Teach the estimates: sleep takes 200 ms.
  REQUIRE(post_job(a.port(), R"({"kind":"sleep","args":{"ms":200}})").status == 200);
  REQUIRE(post_job(a.port(), R"({"kind":"sleep","args":{"ms":200}})").status == 200);
  const std::string jobs = c.pg.scalar("SELECT count(*) FROM sandglass_jobs");
  const HttpAnswer r = post_job(a.port(), R"({"kind":"sleep","args":{"ms":200},"timeout_ms":100})");
  CHECK(r.status == 503);
  CHECK(text(json_of(r), "reason") == "deadline_implausible");
  CHECK(text(json_of(r), "error").find("even with nothing queued ahead") != std::string::npos);
  CHECK(metric(a.port(), "sandglass_cluster_refused_here_total") == 1);
  // A keyed job may attach to an existing one, so the database decides: the same refusal.
  const HttpAnswer keyed =
      post_job(a.port(), R"({"kind":"sleep","args":{"ms":200},"timeout_ms":100,"idempotency_key":"k1"})");
  CHECK(keyed.status == 503);
  CHECK(text(json_of(keyed), "reason") == "deadline_implausible");
  CHECK(metric(a.port(), "sandglass_cluster_refused_here_total") == 1);
  CHECK(c.pg.scalar("SELECT count(*) FROM sandglass_jobs") == jobs);  // neither was inserted
}

TEST_CASE("a database restart: readyz says 503 while it is down, jobs go on after it is back" *
          doctest::timeout(180)) {
  ClusterFixture c;
  DaemonProcess& a = c.node({"sleep"});
  DaemonProcess& b = c.node({"sleep"});
  const std::uint64_t queued = submit_later(a.port(), R"({"kind":"sleep","args":{"ms":10},"timeout_ms":60000})");
  REQUIRE(eventually([&] { return text(record(a.port(), queued), "state") == "completed"; }));
  c.pg.stop();
  REQUIRE(eventually([&] { return http(a.port(), "GET", "/readyz").status == 503; }));
  const HttpAnswer refused = post_job(b.port(), R"({"kind":"sleep","args":{"ms":1}})");
  CHECK(refused.status == 503);
  c.pg.start();
  CAPTURE(a.log());
  CAPTURE(b.log());
  REQUIRE(eventually([&] {
    return http(a.port(), "GET", "/readyz").status == 200 && http(b.port(), "GET", "/readyz").status == 200;
  }, 30s));
  const HttpAnswer after = post_job(b.port(), R"({"kind":"sleep","args":{"ms":5}})");
  CHECK(after.status == 200);
  CHECK(text(json_of(after), "state") == "completed");
}

TEST_CASE("args the claiming node's kind refuses end the job failed, and that node claims on" *
          doctest::timeout(60)) {
  ClusterFixture c;
  // The entry node knows the command `hello`; the only node serving exec does not.
  const std::string entry_config =
      c.config({"sleep"}) + "[commands.hello]\nargv = [\"/bin/echo\", \"hello\"]\n";
  c.nodes.push_back(std::make_unique<DaemonProcess>(
      std::vector<std::string>{"--config", write_temp_file("cluster.toml", entry_config)}));
  DaemonProcess& entry = *c.nodes.back();
  DaemonProcess& runner = c.node({"exec", "spin"});
  const HttpAnswer r = post_job(entry.port(), R"({"kind":"exec","args":{"command":"hello"}})");
  CHECK(r.status == 500);
  const auto o = json_of(r);
  CHECK(text(o, "state") == "failed");
  CHECK(text(o, "reason") == "handler_error");
  CHECK(text(o, "error").find("not valid on node " + ClusterFixture::name_of(runner)) != std::string::npos);
  // The claimer is not stuck: the next job runs.
  const HttpAnswer next = post_job(entry.port(), R"({"kind":"spin","args":{"ms":2}})");
  CAPTURE(next.body);
  CHECK(next.status == 200);
  CHECK(text(json_of(next), "node") == ClusterFixture::name_of(runner));
}

TEST_CASE("SIGTERM drains a node's own running jobs and it leaves, the other nodes go on" *
          doctest::timeout(120)) {
  ClusterFixture c;
  DaemonProcess& a = c.node({"sleep"});
  DaemonProcess& b = c.node({"spin"});
  const std::uint64_t id = submit_later(b.port(), R"({"kind":"sleep","args":{"ms":400},"timeout_ms":20000})");
  REQUIRE(eventually([&] { return text(record(b.port(), id), "state") == "running"; }));
  a.signal(SIGTERM);
  const std::optional<int> code = a.wait_exit(30s);
  REQUIRE(code.has_value());
  CHECK(*code == 0);
  const auto o = record(b.port(), id);
  CHECK(text(o, "state") == "completed");
  CHECK(text(o, "node") == ClusterFixture::name_of(a));
  CHECK(c.pg.scalar("SELECT count(*) FROM sandglass_nodes WHERE node = '" + ClusterFixture::name_of(a) + "'") == "0");
  const HttpAnswer spun = post_job(b.port(), R"({"kind":"spin","args":{"ms":5}})");
  CHECK(spun.status == 200);
  CHECK(text(json_of(spun), "node") == ClusterFixture::name_of(b));
}

TEST_CASE("an unreachable database fails the start with an error naming its host, never the password" *
          doctest::timeout(60)) {
  const std::uint16_t port = free_port();
  const std::string conninfo =
      "host=127.0.0.1 port=" + std::to_string(port) + " user=app password=hunter2secret connect_timeout=2";
  const std::string path = write_temp_file("cluster.toml", "[cluster]\nconninfo = \"" + conninfo + "\"\n");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--config", path, "--listen", "127.0.0.1:0"},
        std::vector<std::string>{"--config", path, "--migrate"}}) {
    const RunResult r = run_sandglassd(args);
    CHECK(r.exit_code == 1);
    const std::string all = r.out + r.err;
    CHECK(all.find("host 127.0.0.1 port " + std::to_string(port)) != std::string::npos);
    CHECK(all.find("hunter2secret") == std::string::npos);
  }
}

TEST_CASE("--migrate applies the schema once, a database migrated by a newer sandglassd is refused" *
          doctest::timeout(60)) {
  PostgresServer pg;
  const std::string path = write_temp_file("cluster.toml", "[cluster]\nconninfo = \"" + pg.conninfo() + "\"\n");
  const RunResult first = run_sandglassd({"--config", path, "--migrate"});
  CHECK(first.exit_code == 0);
  CHECK(first.out.find("schema migrated from version 0 to 7 (001_schema.sql, 002_claim_index.sql, 003_delayed_and_retried.sql, 004_cluster_view.sql, 005_node_channels.sql, 006_intake_counters.sql, 007_standing_queue.sql)") != std::string::npos);
  const RunResult again = run_sandglassd({"--config", path, "--migrate"});
  CHECK(again.exit_code == 0);
  CHECK(again.out.find("schema is up to date (version 7)") != std::string::npos);
  pg.execute("INSERT INTO sandglass_schema_migrations (version, name) VALUES (999, '999_future.sql')");
  const RunResult newer = run_sandglassd({"--config", path, "--listen", "127.0.0.1:0"});
  CHECK(newer.exit_code == 1);
  CHECK(newer.err.find("its schema is version 999, newer than this sandglassd knows (7)") != std::string::npos);
}

}  // TEST_SUITE
