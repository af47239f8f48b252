// A claimed job has one admission decision, the cluster's (its submission's and its claim's,
// with the estimates every node's outcomes feed): the node that claimed it runs it, even when
// its own Runtime, which has seen only this node's runs, would predict that it cannot finish.
// Before, the node's Runtime decided again with its own estimate and refused such a job
// deadline_implausible after the claim.
#include "cluster/cluster_fixture.hpp"

#include <doctest/doctest.h>

#include <csignal>

using namespace sandglass::testing;
using namespace std::chrono_literals;

TEST_SUITE("cluster") {

TEST_CASE("a job the cluster admitted and claimed runs on the claiming node although that node's "
          "own estimate alone would refuse it" *
          doctest::timeout(180)) {
  ClusterFixture c;
  // Samples never age out here, and 16 of them make a window: what each estimator holds is
  // exactly the runs it has seen.
  const std::string runtime = "estimate_window = 16\nestimate_max_age_ms = 600000";
  // A claims nothing ahead of its one worker: while that worker spins, B runs every sleep.
  DaemonProcess& a = c.node({"sleep", "spin"}, 1, runtime, "claim_ahead = 0");
  // A's only sleep run so far takes 400 ms: its Runtime's tail estimate for sleep is 400 ms.
  const HttpAnswer slow = post_job(a.port(), R"({"kind":"sleep","args":{"ms":400},"timeout_ms":30000})");
  REQUIRE(slow.status == 200);
  CHECK(text(json_of(slow), "node") == ClusterFixture::name_of(a));
  // A's worker spins meanwhile (another kind, another estimate), so that B runs what follows.
  const HttpAnswer spin_posted =
      post_job(a.port(), R"({"kind":"spin","args":{"ms":120000},"timeout_ms":180000})", {}, "?wait=false");
  REQUIRE(spin_posted.status == 202);
  const std::uint64_t spin = id_of(spin_posted);
  REQUIRE(eventually([&] { return text(record(a.port(), spin), "state") == "running"; }));
  {
    DaemonProcess& b = c.node({"sleep"}, 2, runtime);
    // 60 quick sleeps submitted on A run on B: A's cluster estimate (fed by the NOTIFYs of the
    // outcomes it waits for) then holds only runs of about 1 ms for sleep (a full window
    // recomputes its figures every 32 records); A's Runtime has seen none of them.
    for (int i = 0; i < 60; ++i) {
      const HttpAnswer quick = post_job(a.port(), R"({"kind":"sleep","args":{"ms":1},"timeout_ms":30000})");
      REQUIRE(quick.status == 200);
      REQUIRE(text(json_of(quick), "node") == ClusterFixture::name_of(b));
    }
    b.signal(SIGTERM);  // B leaves: what comes next can only run on A
    REQUIRE(b.wait_exit(30s).has_value());
  }
  REQUIRE(http(a.port(), "DELETE", "/v1/jobs/" + std::to_string(spin)).status == 200);
  REQUIRE(eventually([&] { return text(record(a.port(), spin), "state") == "cancelled"; }));
  REQUIRE(eventually([&] { return c.pg.scalar("SELECT busy FROM sandglass_nodes WHERE node = '" +
                                              ClusterFixture::name_of(a) + "'") == "0"; }));

  // 300 ms: the cluster (about 1 ms of tail, nothing ahead) admits it and A claims it; A's
  // Runtime alone (400 ms of tail) would call it implausible. It runs, on A, and completes.
  const HttpAnswer tight = post_job(a.port(), R"({"kind":"sleep","args":{"ms":20},"timeout_ms":300})");
  const auto o = json_of(tight);
  INFO(tight.body);
  CHECK(tight.status == 200);
  CHECK(text(o, "state") == "completed");
  CHECK(text(o, "reason") == "ok");
  CHECK(text(o, "node") == ClusterFixture::name_of(a));
  CHECK(o.at("attempt").to_number<int>() == 1);
}

}  // TEST_SUITE
