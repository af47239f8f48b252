// A claim that commits while its answer is lost with the connection: the rows are running under
// a live node that never learned of them. After the reconnect the node takes them back
// (functions.sql, sandglass_take_back_unheld), so each such job still gets exactly one outcome.
#include "cluster/cluster_fixture.hpp"
#include "cluster/held_session.hpp"
#include "cluster/tcp_proxy.hpp"

#include <doctest/doctest.h>

#include <memory>

using namespace sandglass::testing;
using namespace std::chrono_literals;

namespace {

// A row exactly as a committed claim leaves it (claimed at insert: attempt 1, never counted in
// the counters), owned by `owner`, with `left` the SQL interval of time left to its deadline.
std::uint64_t claimed_row(ClusterFixture& c, const std::string& owner, const std::string& node,
                          const std::string& left) {
  return std::stoull(c.pg.scalar(
      "INSERT INTO sandglass_jobs (kind, args, priority, budget_us, deadline, state, owner, attempt, "
      "claimed_at, node_ran) VALUES ('sleep', '{\"ms\":5}', 2, 30000000, clock_timestamp() + "
      "interval '" + left + "', 'running', '" + owner + "', 1, clock_timestamp(), '" + node +
      "') RETURNING id"));
}

// The job's state, or "" while the node cannot read it (its sessions reconnecting).
std::string state_now(std::uint16_t port, std::uint64_t id) {
  const HttpAnswer a = http(port, "GET", "/v1/jobs/" + std::to_string(id));
  return a.status == 200 ? text(json_of(a), "state") : std::string{};
}

}  // namespace

TEST_SUITE("cluster") {

// The take-back gap: the claim's server process outlives its connection, inside the claim's
// transaction (here: waiting for a counter row the test holds), and commits after the node
// reconnected. A take-back that ran before that commit could not see the claim; without ending
// that process first, the job stays running under this live node forever.
TEST_CASE("a claim whose connection broke while its transaction went on is ended before the "
          "take-back, so its job still runs" * doctest::timeout(120)) {
  ClusterFixture c;
  TcpProxy proxy{c.pg.port()};
  DaemonProcess& a = c.node_through(proxy.port(), {"sleep"}, /*workers=*/1);
  const std::string name = ClusterFixture::name_of(a);
  CAPTURE(a.log());

  // A queued job, already counted; the node's counter row of its class is held by the test, so
  // the claim of that job waits inside its transaction.
  c.pg.execute("INSERT INTO sandglass_counters (node, priority, queued, work_us) VALUES ('" + name +
               "', 2, 1, 0)");
  HeldSession holder{c.pg.conninfo()};
  holder.exec("BEGIN");
  holder.exec("SELECT * FROM sandglass_counters WHERE node = '" + name + "' AND priority = 2 FOR UPDATE");
  const std::string id = c.pg.scalar(
      "INSERT INTO sandglass_jobs (kind, args, priority, budget_us, deadline) VALUES ('sleep', "
      "'{\"ms\":5}', 2, 60000000, clock_timestamp() + interval '60 s') RETURNING id");
  c.pg.execute("NOTIFY sandglass_queued, 'sleep'");
  const std::string waiting = "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE "
                              "'sandglassd %' AND wait_event_type = 'Lock'";
  REQUIRE(eventually([&] { return c.pg.scalar(waiting) == "1"; }, 20s));

  // The node loses its connections; PostgreSQL's processes behind them go on.
  proxy.cut();
  REQUIRE(eventually([&] { return metric(a.port(), "sandglass_cluster_take_backs_total") >= 1; }, 30s));
  holder.exec("COMMIT");  // the old claim, if it still lives, commits now

  REQUIRE(eventually([&] {
    return c.pg.scalar("SELECT state FROM sandglass_jobs WHERE id = " + id) == "done";
  }, 20s));
  const auto ran = record(a.port(), std::stoull(id));
  CHECK(text(ran, "state") == "completed");
  CHECK(ran.at("attempt").as_int64() == 1);  // the old claim was undone, not fenced off
  CHECK(text(ran, "node") == name);
  CHECK(metric(a.port(), "sandglass_cluster_lost_answers_total") == 0);
  CHECK(c.pg.scalar("SELECT coalesce(sum(queued), 0) FROM sandglass_counters") == "0");
}

TEST_CASE("claims whose answer was lost are taken back after the reconnect: run again if they "
          "may, else node_lost" * doctest::timeout(120)) {
  ClusterFixture c;
  DaemonProcess& a = c.node({"sleep"});
  const std::string name = ClusterFixture::name_of(a);
  const std::string owner = c.pg.scalar("SELECT owner FROM sandglass_nodes WHERE node = '" + name + "'");
  REQUIRE(!owner.empty());
  const std::uint64_t runnable = claimed_row(c, owner, name, "60 s");
  const std::uint64_t late = claimed_row(c, owner, name, "-1 s");  // past its deadline already

  // While its connections hold, the node has no reason to doubt its claims: the rows stay.
  const HttpAnswer before = post_job(a.port(), R"({"kind":"sleep","args":{"ms":5}})");
  REQUIRE(before.status == 200);
  CHECK(text(record(a.port(), runnable), "state") == "running");
  CHECK(text(record(a.port(), late), "state") == "running");

  // Every session of the node drops, as when the answer of a committed claim is lost.
  c.pg.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
               "WHERE application_name LIKE 'sandglassd %' OR application_name = 'sandglassd-cluster'");

  CAPTURE(a.log());
  REQUIRE(eventually([&] { return state_now(a.port(), runnable) == "completed"; }, 30s));
  const auto ran = record(a.port(), runnable);
  CHECK(ran.at("attempt").as_int64() == 2);  // claimed again: the lost claim's attempt is fenced off
  CHECK(text(ran, "node") == name);
  REQUIRE(eventually([&] { return state_now(a.port(), late) == "failed"; }, 30s));
  const auto lost = record(a.port(), late);
  CHECK(text(lost, "reason") == "node_lost");
  CHECK(text(lost, "error").find("answer was lost") != std::string::npos);
  CHECK(lost.at("attempt").as_int64() == 1);
  CHECK(metric(a.port(), "sandglass_cluster_lost_answers_total") == 2);
  // Nothing is left running or counted as queued.
  CHECK(c.pg.scalar("SELECT count(*) FROM sandglass_jobs WHERE state <> 'done'") == "0");
  CHECK(c.pg.scalar("SELECT coalesce(sum(queued), 0) FROM sandglass_counters") == "0");
}

}  // TEST_SUITE

TEST_SUITE("cluster") {

// 005's take-back passed over a row another transaction held at that moment (SKIP LOCKED), and
// nothing looked at it again. Here the test holds the row as a DELETE's sandglass_cancel would,
// while the node takes back its lost claims (functions.sql, sandglass_take_back_unheld).
TEST_CASE("a lost claim whose row another transaction holds during the take-back is still "
          "taken back once that transaction ends" * doctest::timeout(120)) {
  ClusterFixture c;
  DaemonProcess& a = c.node({"sleep"});
  const std::string name = ClusterFixture::name_of(a);
  const std::string owner = c.pg.scalar("SELECT owner FROM sandglass_nodes WHERE node = '" + name + "'");
  REQUIRE(!owner.empty());
  const std::uint64_t id = claimed_row(c, owner, name, "60 s");
  CAPTURE(a.log());

  HeldSession holder{c.pg.conninfo()};
  holder.exec("BEGIN");
  holder.exec("SELECT id FROM sandglass_jobs WHERE id = " + std::to_string(id) + " FOR UPDATE");
  c.pg.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
               "WHERE application_name LIKE 'sandglassd %' OR application_name = 'sandglassd-cluster'");
  // The take-back has run past the row, or waits for it.
  REQUIRE(eventually([&] {
    return metric(a.port(), "sandglass_cluster_take_backs_total") >= 1 ||
           c.pg.scalar("SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE "
                       "'sandglassd %' AND wait_event_type = 'Lock'") != "0";
  }, 30s));
  holder.exec("COMMIT");

  REQUIRE(eventually([&] { return state_now(a.port(), id) == "completed"; }, 20s));
  const auto ran = record(a.port(), id);
  CHECK(ran.at("attempt").as_int64() == 2);
  CHECK(metric(a.port(), "sandglass_cluster_lost_answers_total") == 1);
  CHECK(c.pg.scalar("SELECT count(*) FROM sandglass_jobs WHERE state <> 'done'") == "0");
  CHECK(c.pg.scalar("SELECT coalesce(sum(queued), 0) FROM sandglass_counters") == "0");
}

}  // TEST_SUITE
