// A claim that commits while its answer is lost with the connection: the rows are running under
// a live node that never learned of them. After the reconnect the node takes them back
// (migrations/005_take_back.sql), so each such job still gets exactly one outcome.
#include "cluster/cluster_fixture.hpp"

#include <doctest/doctest.h>

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
               "WHERE application_name = 'sandglassd-cluster'");

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
