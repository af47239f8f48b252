// A cluster forgets finished job records records.keep_ms after they ended, at the earliest one
// second after (functions.sql, sandglass_forget), as a lone daemon does: GET
// then answers 404 on every node and a keyed retry runs anew; queued and running jobs stay.
#include "cluster/cluster_fixture.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <thread>

using namespace sandglass::testing;
using namespace std::chrono_literals;

TEST_SUITE("cluster") {

TEST_CASE("finished records are forgotten on every node after records.keep_ms, queued and "
          "running jobs stay, and a keyed retry of a forgotten job runs anew" *
          doctest::timeout(120)) {
  ClusterFixture c;
  const std::string keep = "[records]\nkeep_ms = 300\n";  // below the least kept: 1 s
  DaemonProcess& a = c.node({"sleep"}, 2, {}, keep);
  DaemonProcess& b = c.node({"spin"}, 1, {}, keep);
  // Mixed: two kinds, four classes and several budgets.
  const std::uint64_t long_run = submit_later(a.port(), R"({"kind":"sleep","args":{"ms":6000},"timeout_ms":20000,"priority":"high"})");
  // No finished job can have ended before this: a lower bound of both finish times, which the
  // rule "forgotten at the earliest 1 s after its end" measures from.
  const auto submitted_at = std::chrono::steady_clock::now();
  const HttpAnswer keyed =
      post_job(b.port(), R"({"kind":"spin","args":{"ms":1},"timeout_ms":5000,"idempotency_key":"forget-1"})");
  REQUIRE(keyed.status == 200);
  const std::uint64_t keyed_id = id_of(keyed);
  const HttpAnswer quick = post_job(a.port(), R"({"kind":"sleep","args":{"ms":1},"timeout_ms":3000,"priority":"critical"})");
  REQUIRE(quick.status == 200);
  const std::uint64_t quick_id = id_of(quick);
  // Node a's second worker, then a job behind both (queued, or claimed ahead: GET says running).
  const std::uint64_t waiting = submit_later(b.port(), R"({"kind":"sleep","args":{"ms":20000},"timeout_ms":30000,"priority":"sheddable"})");
  const std::uint64_t behind = submit_later(b.port(), R"({"kind":"sleep","args":{"ms":1},"timeout_ms":30000,"priority":"sheddable"})");
  // Right after: every node still has both finished records.
  CHECK(text(record(b.port(), quick_id), "state") == "completed");
  CHECK(text(record(a.port(), keyed_id), "state") == "completed");

  // Gone within the least kept plus two of the nodes' looks (one a second each).
  bool forgotten = false;
  while (!forgotten && std::chrono::steady_clock::now() < submitted_at + 6s) {
    std::this_thread::sleep_for(100ms);
    forgotten = http(a.port(), "GET", "/v1/jobs/" + std::to_string(quick_id)).status == 404 &&
                http(a.port(), "GET", "/v1/jobs/" + std::to_string(keyed_id)).status == 404;
  }
  REQUIRE(forgotten);
  CHECK(std::chrono::steady_clock::now() - submitted_at >= 1s);
  CHECK(http(b.port(), "GET", "/v1/jobs/" + std::to_string(quick_id)).status == 404);
  CHECK(http(b.port(), "GET", "/v1/jobs/" + std::to_string(keyed_id)).status == 404);
  // The running jobs and the one behind them are still there.
  CHECK(text(record(b.port(), long_run), "state") == "running");
  CHECK(text(record(b.port(), waiting), "state") == "running");
  const std::string behind_state = text(record(a.port(), behind), "state");
  CHECK((behind_state == "queued" || behind_state == "claimed" || behind_state == "running"));
  CHECK(metric(a.port(), "sandglass_cluster_records_forgotten_total") +
            metric(b.port(), "sandglass_cluster_records_forgotten_total") ==
        2);

  // The key is free again: a retry runs as a new job.
  const HttpAnswer again =
      post_job(a.port(), R"({"kind":"spin","args":{"ms":1},"timeout_ms":5000,"idempotency_key":"forget-1"})");
  REQUIRE(again.status == 200);
  CHECK(id_of(again) != keyed_id);
  for (const std::uint64_t id : {long_run, waiting, behind}) {
    http(b.port(), "DELETE", "/v1/jobs/" + std::to_string(id));
  }
}

}  // TEST_SUITE
