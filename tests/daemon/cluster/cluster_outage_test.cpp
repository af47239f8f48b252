// A database outage is nobody's fault (migrations/functions.sql, sandglass_beat and
// sandglass_sweep): while PostgreSQL is down every node's lease seems to lapse, but no node
// takes back another's jobs before it has itself beaten for a whole lease since the server
// came back, and by then every live node has beaten too. So a restart under running jobs takes
// nothing from anyone: each job keeps its first attempt and gets exactly one outcome.
#include "cluster/cluster_fixture.hpp"

#include <doctest/doctest.h>

#include <thread>

using namespace sandglass::testing;
using namespace std::chrono_literals;

TEST_SUITE("cluster database outage") {

TEST_CASE("a PostgreSQL restart under jobs running on every node takes back nothing: no job "
          "runs twice or ends node_lost, each gets one outcome" * doctest::timeout(300)) {
  std::chrono::milliseconds outage{};
  SUBCASE("a 2 s restart") { outage = 2s; }
  SUBCASE("a 10 s restart") { outage = 10s; }
  const int run_ms = static_cast<int>(outage.count()) + 6'000;  // outlasts the outage and the reconnects
  ClusterFixture c;
  DaemonProcess& a = c.node({"sleep", "spin"}, 3);
  DaemonProcess& b = c.node({"sleep"}, 3);
  c.log_outcomes();
  // Mixed classes, budgets and commit points (before the outage, during it, after it); the
  // spin jobs are short and end on their node while the others run.
  const char* priorities[] = {"critical", "high", "normal", "sheddable"};
  std::vector<std::uint64_t> jobs;
  for (int i = 0; i < 6; ++i) {
    const std::string commit =
        i % 3 == 0 ? "" : fmt::format(R"(,"commit_at_ms":{})", i % 3 == 1 ? 100 : run_ms - 2'000);
    jobs.push_back(submit_later(i % 2 == 0 ? a.port() : b.port(),
                                fmt::format(R"({{"kind":"sleep","args":{{"ms":{}{}}},"priority":"{}","timeout_ms":{}}})",
                                            run_ms + 100 * i, commit, priorities[i % 4], 60'000 + 5'000 * i)));
  }
  for (int i = 0; i < 2; ++i) {
    jobs.push_back(submit_later(b.port(), fmt::format(R"({{"kind":"spin","args":{{"ms":{}}},"priority":"{}","timeout_ms":30000}})",
                                                      5 + 5 * i, priorities[i])));
  }
  // Every sleep job runs, on both nodes.
  REQUIRE(eventually([&] {
    return c.pg.scalar("SELECT count(*) || '/' || count(DISTINCT node_ran) FROM sandglass_jobs "
                       "WHERE state = 'running' AND kind = 'sleep'") == "6/2";
  }, 30s));
  REQUIRE(eventually([&] { return c.pg.scalar("SELECT count(*) FROM sandglass_jobs WHERE kind = 'spin' AND state = 'done'") == "2"; }, 30s));

  c.pg.stop();
  std::this_thread::sleep_for(outage);  // the fault itself: the database is down this long
  c.pg.start();

  REQUIRE(eventually([&] {
    return c.pg.scalar("SELECT count(*) FROM sandglass_jobs WHERE state = 'done'") == std::to_string(jobs.size());
  }, std::chrono::milliseconds{run_ms} + 60s));
  for (const std::uint64_t id : jobs) {
    const auto row = c.pg.query("SELECT outcome_state, reason, attempt FROM sandglass_jobs WHERE id = " + std::to_string(id));
    INFO("job ", id, ": ", row[0][0], " ", row[0][1], " attempt ", row[0][2]);
    CHECK(row[0][0] == "completed");
    CHECK(row[0][2] == "1");
  }
  CHECK(c.pg.scalar("SELECT count(*) FROM outcome_log") == std::to_string(jobs.size()));
  CHECK(c.pg.scalar("SELECT count(DISTINCT id) FROM outcome_log") == std::to_string(jobs.size()));
  for (const DaemonProcess* n : {&a, &b}) {
    CHECK(metric(n->port(), "sandglass_cluster_reclaimed_total") == 0);
    CHECK(metric(n->port(), "sandglass_cluster_node_lost_total") == 0);
    CHECK(metric(n->port(), "sandglass_cluster_stale_outcomes_total") == 0);
  }
}

}  // TEST_SUITE
