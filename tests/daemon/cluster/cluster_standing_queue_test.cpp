// The standing-queue rule on real cluster nodes: a node detects a standing queue from the queue
// waits of the jobs it claims and reports it with its beat; while it stands, admission takes
// only jobs predicted to start within the target (admission.queue_delay_target_ms), as a lone
// daemon's; a burst is absorbed whole, an urgent class still overtakes, and once the queue has
// drained a job with a long budget is admitted again. The state shows in /v1/stats and /metrics.
#include "cluster/cluster_fixture.hpp"

#include <doctest/doctest.h>

#include <boost/json/array.hpp>

using namespace sandglass::testing;

namespace {

boost::json::object stats_of(std::uint16_t port) {
  const HttpAnswer a = http(port, "GET", "/v1/stats");
  REQUIRE(a.status == 200);
  return json_of(a);
}

bool standing_in_stats(std::uint16_t port) {
  return stats_of(port).at("admission").at("standing_queue").as_bool();
}

// The standing-queue target the node's own row reports in the cluster object (its last beat).
double reported_target_ms(std::uint16_t port) {
  const boost::json::object s = stats_of(port);
  for (const auto& n : s.at("cluster").at("nodes").as_array()) {
    const auto& node = n.as_object();
    if (!node.at("lost").as_bool()) return node.at("standing_queue_target_ms").to_number<double>();
  }
  return -1;
}

}  // namespace

TEST_SUITE("cluster") {

TEST_CASE("a burst is admitted whole, then once the queue has stood for an interval newcomers "
          "predicted to start beyond the target are refused while an urgent one is admitted, and "
          "once it has drained a long budget is admitted again" *
          doctest::timeout(120)) {
  ClusterFixture c;
  // One sleep worker, target 100 ms: the interval is 1 s of starts that each waited longer.
  DaemonProcess& a = c.node({"sleep"}, 1, "[admission]\nqueue_delay_target_ms = 100");
  CAPTURE(a.log());

  // A burst of 90 sleeps of 30 ms (2.7 s of work) with long budgets: admitted whole, though the
  // last ones will wait far beyond the target (no queue stood when they came).
  std::string jobs;
  for (int i = 0; i < 90; ++i) {
    jobs += (jobs.empty() ? "" : ",") + std::string{R"({"kind":"sleep","args":{"ms":30},"timeout_ms":30000})"};
  }
  const HttpAnswer burst = http(a.port(), "POST", "/v1/jobs/batch", R"({"jobs":[)" + jobs + "]}");
  REQUIRE(burst.status == 200);
  const boost::json::object answers = json_of(burst);
  int accepted = 0;
  for (const auto& item : answers.at("jobs").as_array()) {
    if (item.as_object().at("status").as_int64() == 202) ++accepted;
  }
  CHECK(accepted == 90);

  // The worker starts jobs that waited longer than 100 ms for a whole interval: the node says
  // the queue stands, and its beat reports the target.
  REQUIRE(eventually([&] { return reported_target_ms(a.port()) == 100.0; }));
  CHECK(standing_in_stats(a.port()));
  CHECK(stats_of(a.port()).at("admission").at("queue_delay_target_ms").to_number<double>() == 100.0);
  const std::string metrics = http(a.port(), "GET", "/metrics").body;
  CHECK(metrics.find("\nsandglass_admission_standing_queue 1") != std::string::npos);
  CHECK(metrics.find("\nsandglass_admission_queue_delay_target_seconds 0.1") != std::string::npos);

  // A newcomer of the same class would start after the queued work, beyond the target, though
  // its 30 s budget would let it finish: refused, as a lone daemon refuses it.
  const HttpAnswer late = post_job(a.port(), R"({"kind":"sleep","args":{"ms":30},"timeout_ms":30000})", {}, "?wait=false");
  CHECK(late.status == 503);
  const boost::json::object refused = json_of(late);
  CHECK(text(refused, "reason") == "queue_full");
  CHECK(text(refused, "error").starts_with("standing queue: predicted start in "));
  CHECK(text(refused, "error").ends_with(" > target delay 100ms"));
  CHECK(!late.header("retry-after").empty());
  // A keyed one is decided by the same rule.
  const HttpAnswer keyed = post_job(
      a.port(), R"({"kind":"sleep","args":{"ms":30},"timeout_ms":30000,"idempotency_key":"s-1"})", {}, "?wait=false");
  CHECK(keyed.status == 503);
  CHECK(text(json_of(keyed), "reason") == "queue_full");
  // An urgent job has nothing of its class ahead: it starts once a worker frees up, within the
  // target, and is admitted.
  const HttpAnswer urgent = post_job(
      a.port(), R"({"kind":"sleep","args":{"ms":10},"priority":"high","timeout_ms":30000})", {}, "?wait=false");
  CHECK(urgent.status == 202);

  // Drained: a claim finds nothing, the queue no longer stands, and a job with a long budget
  // is admitted whatever it waits.
  REQUIRE(eventually([&] { return reported_target_ms(a.port()) == 0.0; }, std::chrono::seconds{30}));
  CHECK(!standing_in_stats(a.port()));
  CHECK(post_job(a.port(), R"({"kind":"sleep","args":{"ms":30},"timeout_ms":30000})", {}, "?wait=false").status == 202);
}

}  // TEST_SUITE
