// One identity per node (migrations/functions.sql, sandglass_join): a node whose name a live
// incarnation holds (its beats within the lease) is refused with a clear error instead of
// evicting it, and the live node keeps its jobs; the default name is the host's name and the
// bound port.
#include "cluster/cluster_fixture.hpp"

#include <doctest/doctest.h>

#include <unistd.h>

using namespace sandglass::testing;
using namespace std::chrono_literals;

TEST_SUITE("cluster node names") {

TEST_CASE("a second node with a live node's name is refused at start, and the live node keeps "
          "running its jobs" * doctest::timeout(120)) {
  ClusterFixture c;
  DaemonProcess& live = c.node({"sleep"}, 2, {}, "node = \"worker-1\"");
  c.log_outcomes();
  const std::uint64_t job = submit_later(
      live.port(), R"({"kind":"sleep","args":{"ms":2000},"priority":"high","timeout_ms":30000})");
  REQUIRE(eventually([&] { return state_of(live.port(), job) == "running"; }));

  const std::string path = write_temp_file("cluster.toml", c.config({"sleep"}, 2, {}, "node = \"worker-1\""));
  std::string refusal;
  try {
    DaemonProcess second{{"--config", path}};
    FAIL("a second node named worker-1 started");
  } catch (const std::runtime_error& e) {
    refusal = e.what();
  }
  CHECK(refusal.find("node name \"worker-1\" is in use by a live node") != std::string::npos);

  REQUIRE(eventually([&] { return state_of(live.port(), job) == "completed"; }, 30s));
  const auto o = record(live.port(), job);
  CHECK(o.at("attempt").as_int64() == 1);
  CHECK(text(o, "node") == "worker-1");
  CHECK(c.pg.scalar("SELECT count(*) FROM outcome_log") == "1");
  CHECK(c.pg.scalar("SELECT count(*) FROM sandglass_nodes WHERE node = 'worker-1'") == "1");
}

TEST_CASE("a node without a configured name is named after its host and bound port" *
          doctest::timeout(120)) {
  ClusterFixture c;
  DaemonProcess& n = c.node({"sleep"});
  char host[256] = {};
  REQUIRE(::gethostname(host, sizeof host - 1) == 0);
  const std::string expected = std::string{host} + ":" + std::to_string(n.port());
  CHECK(c.pg.scalar("SELECT node FROM sandglass_nodes") == expected);
  CHECK(ClusterFixture::name_of(n) == expected);
}

}  // TEST_SUITE
