// A claimed job has one admission decision, the cluster's (its submission's and its claim's):
// the node that claimed it runs it without its Runtime deciding again, even when the Runtime,
// deciding by the kind's recent runs (a claimed job states no size to it), would predict that
// it cannot finish.
#include "cluster/cluster_fixture.hpp"

#include <doctest/doctest.h>

using namespace sandglass::testing;
using namespace std::chrono_literals;

TEST_SUITE("cluster") {

TEST_CASE("a job the cluster admitted and claimed runs on the claiming node although that node's "
          "Runtime, deciding by the kind's recent runs, would refuse it" *
          doctest::timeout(180)) {
  ClusterFixture c;
  // Samples never age out here: the estimate holds exactly the runs it has seen.
  DaemonProcess& a = c.node({"sleep"}, 1, "estimate_max_age_ms = 600000");
  // The only sleep run so far takes 400 ms: the tail estimate of sleep is 400 ms.
  const HttpAnswer slow = post_job(a.port(), R"({"kind":"sleep","args":{"ms":400},"timeout_ms":30000})");
  REQUIRE(slow.status == 200);
  CHECK(text(json_of(slow), "node") == ClusterFixture::name_of(a));
  REQUIRE(eventually([&] { return c.pg.scalar("SELECT busy FROM sandglass_nodes WHERE node = '" +
                                              ClusterFixture::name_of(a) + "'") == "0"; }));

  // 300 ms for a sleep of 20 ms: the cluster counts its stated size (nothing ahead) and admits
  // it, and A claims it; A's Runtime, by the kind's 400 ms tail, would call it implausible. It
  // runs, on A, and completes.
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
