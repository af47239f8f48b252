// Wake-ups of busy nodes (migrations/functions.sql, "Hungry nodes", claimer.cpp): a job
// queued while every node's last claim got all it asked for sends no sandglass_queued, and still
// starts as soon as a worker frees up, because the exchange that writes the freed worker's
// outcome claims again. The poll is 60 s here, longer than the test's timeout, so neither start
// below can come from it.
#include "cluster/cluster_fixture.hpp"
#include "cluster/outcome_listener.hpp"

#include <doctest/doctest.h>

using namespace sandglass::testing;
using namespace std::chrono_literals;

namespace {

// A node of one worker serving sleep and spin, claiming nothing ahead, polling every 60 s.
DaemonProcess& slow_polling_node(ClusterFixture& c) {
  std::string config = c.config({"sleep", "spin"}, /*workers=*/1, {}, "claim_ahead = 0");
  const std::string poll = "poll_ms = 100";
  REQUIRE(config.find(poll) != std::string::npos);
  config.replace(config.find(poll), poll.size(), "poll_ms = 60000");
  c.nodes.push_back(std::make_unique<DaemonProcess>(
      std::vector<std::string>{"--config", write_temp_file("cluster.toml", config)}));
  return *c.nodes.back();
}

std::string column(ClusterFixture& c, std::uint64_t id, const std::string& name) {
  return c.pg.scalar("SELECT " + name + " FROM sandglass_jobs WHERE id = " + std::to_string(id));
}

}  // namespace

TEST_SUITE("cluster") {

TEST_CASE("a job queued while every node is busy sends no NOTIFY and starts when a worker frees "
          "up, once a node is hungry, the next one queued wakes it" * doctest::timeout(60)) {
  ClusterFixture c;
  DaemonProcess& a = slow_polling_node(c);
  DaemonProcess& b = slow_polling_node(c);
  CAPTURE(a.log());
  CAPTURE(b.log());

  // Two long jobs, queued behind the nodes' backs and announced by hand: each node's claimer
  // takes one (all it asked for), so neither node is hungry.
  c.pg.execute(
      "INSERT INTO sandglass_jobs (kind, args, priority, budget_us, work_us, deadline) "
      "SELECT 'sleep', '{\"ms\":50000}', 2, 55000000, 0, clock_timestamp() + interval '55 s' "
      "FROM generate_series(1, 2);"
      "INSERT INTO sandglass_counters (node, priority, queued, work_us) VALUES ('test', 2, 2, 0)");
  c.pg.execute("NOTIFY sandglass_queued, 'sleep'");
  REQUIRE(eventually([&] {
    return c.pg.scalar("SELECT string_agg(node_ran, ',' ORDER BY node_ran) FROM sandglass_jobs "
                       "WHERE state = 'running'") ==
           std::min(ClusterFixture::name_of(a), ClusterFixture::name_of(b)) + "," +
               std::max(ClusterFixture::name_of(a), ClusterFixture::name_of(b));
  }));
  REQUIRE(eventually([&] {
    return c.pg.scalar("SELECT string_agg(hungry::text, ',') FROM sandglass_hunger") == "false,false";
  }));

  // Two jobs of other kinds, classes and budgets, each submitted on a busy node: queued, and
  // nobody is told. Their budgets outlast the long jobs (each node reports 50 s of running
  // work), so admission can promise them a start.
  NotifyListener queued{c.pg, "sandglass_queued"};
  const std::uint64_t normal_spin =
      submit_later(b.port(), R"({"kind":"spin","args":{"ms":5},"priority":"normal","timeout_ms":70000})");
  const std::uint64_t critical_sleep =
      submit_later(a.port(), R"({"kind":"sleep","args":{"ms":5},"priority":"critical","timeout_ms":80000})");
  CHECK(column(c, normal_spin, "state") == "queued");
  CHECK(column(c, critical_sleep, "state") == "queued");
  CHECK(queued.payloads().empty());

  // One node's worker frees up (its long job is cancelled): it claims the critical job, then,
  // as that one ends, the normal one. No NOTIFY and no poll brought either.
  const std::string freed = c.pg.scalar(
      "SELECT id FROM sandglass_jobs WHERE state = 'running' AND node_ran = '" + ClusterFixture::name_of(a) + "'");
  REQUIRE(!freed.empty());
  CHECK(http(b.port(), "DELETE", "/v1/jobs/" + freed).status == 200);
  REQUIRE(eventually([&] { return state_of(b.port(), normal_spin) == "completed"; }, 30s));
  CHECK(state_of(a.port(), critical_sleep) == "completed");
  CHECK(column(c, critical_sleep, "node_ran") == ClusterFixture::name_of(a));
  CHECK(column(c, normal_spin, "node_ran") == ClusterFixture::name_of(a));
  CHECK(column(c, critical_sleep, "attempt") == "1");
  CHECK(column(c, normal_spin, "attempt") == "1");
  CHECK(c.pg.scalar("SELECT " + std::to_string(critical_sleep) + " = (SELECT id FROM sandglass_jobs "
                    "WHERE id IN (" + std::to_string(critical_sleep) + ", " + std::to_string(normal_spin) +
                    ") ORDER BY claimed_at LIMIT 1)") == "t");
  CHECK(queued.payloads().empty());

  // Node a's next claim came back empty: it is hungry, so a job queued on busy b wakes it.
  REQUIRE(eventually([&] {
    return c.pg.scalar("SELECT hungry FROM sandglass_hunger h JOIN sandglass_nodes n USING (owner) "
                       "WHERE n.node = '" + ClusterFixture::name_of(a) + "'") == "t";
  }));
  const std::uint64_t high_sleep =
      submit_later(b.port(), R"({"kind":"sleep","args":{"ms":5},"priority":"high","timeout_ms":75000})");
  REQUIRE(eventually([&] { return state_of(b.port(), high_sleep) == "completed"; }, 30s));
  CHECK(column(c, high_sleep, "node_ran") == ClusterFixture::name_of(a));
  CHECK(queued.payloads() == std::vector<std::string>{"sleep"});

  // Exactly one outcome each; the other long job still runs on b.
  CHECK(c.pg.scalar("SELECT string_agg(n || ' ' || s, ',' ORDER BY s) FROM (SELECT count(*) AS n, "
                    "state || ':' || coalesce(outcome_state, '') AS s FROM sandglass_jobs GROUP BY 2) g") ==
        "1 done:cancelled,3 done:completed,1 running:");
  CHECK(column(c, std::stoull(freed), "outcome_state") == "cancelled");
  CHECK(c.pg.scalar("SELECT coalesce(sum(queued), 0) FROM sandglass_counters") == "0");
}

}  // TEST_SUITE
