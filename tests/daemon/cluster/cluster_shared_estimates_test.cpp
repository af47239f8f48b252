// A cluster node has one run-time estimate per key, its Runtime's: the runs of the other nodes
// reach it through their announced outcomes, its own runs are in it once.
#include "cluster/cluster_fixture.hpp"

#include <doctest/doctest.h>

#include <cstdint>

using namespace sandglass::testing;
using namespace std::chrono_literals;

namespace {

// The estimate of `key` in /v1/stats on `port`; an empty object when there is none.
boost::json::object estimate_in_stats(std::uint16_t port, const std::string& key) {
  const boost::json::object s = json_of(http(port, "GET", "/v1/stats"));
  const auto* found = s.at("estimates").as_object().if_contains(key);
  return found != nullptr && found->is_object() ? found->as_object() : boost::json::object{};
}

std::int64_t samples_of(const boost::json::object& estimate) {
  const auto* samples = estimate.if_contains("samples");
  return samples == nullptr ? 0 : samples->to_number<std::int64_t>();
}

}  // namespace

TEST_SUITE("cluster") {

TEST_CASE("a node's estimate holds the runs made on another node once, and the runner's holds "
          "its own runs once" *
          doctest::timeout(120)) {
  ClusterFixture c;
  DaemonProcess& a = c.node({"sleep"}, 1);  // runs every sleep
  DaemonProcess& b = c.node({"spin"}, 1);   // runs none
  REQUIRE(eventually([&] {
    return http(a.port(), "GET", "/readyz").status == 200 && http(b.port(), "GET", "/readyz").status == 200;
  }));
  // One after another, each ending more than the sharing interval (50 ms) after the one
  // before: every outcome's exchange announces its run time to every node.
  constexpr int kRuns = 5;
  for (int i = 0; i < kRuns; ++i) {
    const HttpAnswer r = post_job(a.port(), R"({"kind":"sleep","args":{"ms":80},"timeout_ms":30000})");
    REQUIRE(r.status == 200);
    REQUIRE(text(json_of(r), "node") == ClusterFixture::name_of(a));
  }
  // A answered each job once its listener had heard that job's line: every line is in by now.
  const boost::json::object on_a = estimate_in_stats(a.port(), "sleep");
  CAPTURE(on_a);
  CHECK(samples_of(on_a) == kRuns);
  // B ran none of them: they reach its estimate from A's announced outcomes.
  REQUIRE(eventually([&] { return samples_of(estimate_in_stats(b.port(), "sleep")) >= kRuns; }));
  const boost::json::object on_b = estimate_in_stats(b.port(), "sleep");
  CAPTURE(on_b);
  CHECK(samples_of(on_b) == kRuns);
  CHECK(on_b.at("tail_ms").to_number<std::int64_t>() >= 80);
  CHECK(on_b.at("mean_ms").to_number<std::int64_t>() >= 80);
  CHECK(samples_of(estimate_in_stats(a.port(), "sleep")) == kRuns);
}

TEST_CASE("a node refuses by the run times of another node's runs: a job of a kind it has never "
          "run whose estimate exceeds the time left" *
          doctest::timeout(120)) {
  ClusterFixture c;
  // Both know the command; only A claims exec jobs. The commands' table follows [cluster].
  const std::string commands = "\n[commands.slow]\nargv = [\"/bin/sleep\", \"0.3\"]\n";
  DaemonProcess& a = c.node({"exec"}, 1, {}, commands);
  DaemonProcess& b = c.node({"spin"}, 1, {}, commands);
  REQUIRE(eventually([&] {
    return http(a.port(), "GET", "/readyz").status == 200 && http(b.port(), "GET", "/readyz").status == 200;
  }));
  for (int i = 0; i < 2; ++i) {
    const HttpAnswer r = post_job(a.port(), R"({"kind":"exec","args":{"command":"slow"},"timeout_ms":30000})");
    REQUIRE(r.status == 200);
    REQUIRE(text(json_of(r), "node") == ClusterFixture::name_of(a));
  }
  // A cluster node's estimate key of a job is its kind, on the node that ran it and on the
  // one that heard of it.
  CHECK(samples_of(estimate_in_stats(a.port(), "exec")) == 2);
  CHECK(estimate_in_stats(a.port(), "exec:slow").empty());
  REQUIRE(eventually([&] { return samples_of(estimate_in_stats(b.port(), "exec")) == 2; }));
  CHECK(estimate_in_stats(b.port(), "exec").at("tail_ms").to_number<std::int64_t>() >= 300);

  // 200 ms cannot fit a 300 ms run, even with nothing queued ahead: B refuses it itself.
  const std::string jobs = c.pg.scalar("SELECT count(*) FROM sandglass_jobs");
  const HttpAnswer refused = post_job(b.port(), R"({"kind":"exec","args":{"command":"slow"},"timeout_ms":200})");
  CHECK(refused.status == 503);
  CHECK(text(json_of(refused), "reason") == "deadline_implausible");
  CHECK(text(json_of(refused), "error").find("this kind's run-time estimate") != std::string::npos);
  CHECK(metric(b.port(), "sandglass_cluster_refused_here_total") == 1);
  CHECK(c.pg.scalar("SELECT count(*) FROM sandglass_jobs") == jobs);
}

}  // TEST_SUITE
