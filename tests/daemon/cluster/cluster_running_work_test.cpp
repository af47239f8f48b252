// Cluster admission counts the running jobs' expected rest while no worker is idle, as a lone
// daemon's admission does (migrations/functions.sql, "Admission and intake"). Before, a claim took
// its jobs' work out of the counters and admission saw an empty queue behind a busy cluster.
#include "cluster/cluster_fixture.hpp"

#include <doctest/doctest.h>

using namespace sandglass::testing;
using namespace std::chrono_literals;

TEST_SUITE("cluster") {

TEST_CASE("with every worker busy a job is refused when the running job's rest and its own run "
          "do not fit its budget, with a worker idle the same job is admitted" *
          doctest::timeout(120)) {
  ClusterFixture c;
  DaemonProcess& a = c.node({"sleep"}, 1);
  // Teach the estimate: sleep takes 2 s (its tail, as all its runs are alike).
  REQUIRE(post_job(a.port(), R"({"kind":"sleep","args":{"ms":2000},"timeout_ms":30000})").status == 200);
  REQUIRE(post_job(a.port(), R"({"kind":"sleep","args":{"ms":2000},"timeout_ms":30000})").status == 200);
  // The only worker takes another such job; the node reports it with its next heartbeat.
  const HttpAnswer runner = post_job(a.port(), R"({"kind":"sleep","args":{"ms":2000},"timeout_ms":30000})", {}, "?wait=false");
  REQUIRE(runner.status == 202);
  const std::uint64_t runner_id = json_of(runner).at("id").to_number<std::uint64_t>();
  REQUIRE(eventually([&] {
    return c.pg.scalar("SELECT busy FROM sandglass_nodes") == "1" &&
           c.pg.scalar("SELECT running_rest_us > 1500000 FROM sandglass_nodes") == "t";
  }));
  // Nothing is queued, so the counters alone admit it (its own 1.2 s in a 2.4 s budget); with
  // the running job's expected rest (1.5 s or more when reported, and it is refused as long as
  // more than about 1.2 s are left) it does not fit.
  const std::string jobs = c.pg.scalar("SELECT count(*) FROM sandglass_jobs");
  const HttpAnswer refused = post_job(a.port(), R"({"kind":"sleep","args":{"ms":1200},"timeout_ms":2400})");
  CHECK(refused.status == 503);
  CHECK(text(json_of(refused), "reason") == "deadline_implausible");
  CHECK(c.pg.scalar("SELECT count(*) FROM sandglass_jobs") == jobs);
  // Once the worker is free again, the very same job is admitted and runs.
  REQUIRE(eventually([&] { return state_of(a.port(), runner_id) == "completed"; }, 30s));
  REQUIRE(eventually([&] { return c.pg.scalar("SELECT busy FROM sandglass_nodes") == "0"; }));
  const HttpAnswer admitted = post_job(a.port(), R"({"kind":"sleep","args":{"ms":1200},"timeout_ms":2400})");
  CHECK(admitted.status == 200);
  CHECK(text(json_of(admitted), "reason") == "ok");
}

}  // TEST_SUITE
