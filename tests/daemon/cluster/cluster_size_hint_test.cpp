// Cluster admission by a job's own size: a stated size (expected_ms, or the ms of sleep and
// spin) is what the job counts as work queued ahead and what its own run must fit, as in a lone
// daemon, so one long job of a kind does not lock its short ones out.
#include "cluster/cluster_fixture.hpp"

#include <doctest/doctest.h>

using namespace sandglass::testing;
using namespace std::chrono_literals;

TEST_SUITE("cluster") {

TEST_CASE("after one long sleep, short sleeps whose own size fits their budget are admitted and "
          "run, keyed or not, while a job whose stated size does not fit is refused" *
          doctest::timeout(120)) {
  ClusterFixture c;
  DaemonProcess& a = c.node({"sleep"}, 1);
  CAPTURE(a.log());
  REQUIRE(post_job(a.port(), R"({"kind":"sleep","args":{"ms":1500}})").status == 200);

  const HttpAnswer short_one = post_job(a.port(), R"({"kind":"sleep","args":{"ms":10},"timeout_ms":1000})");
  CHECK(short_one.status == 200);
  CHECK(text(json_of(short_one), "state") == "completed");
  // Keyed: decided by the database (sandglass_admit), queued, then claimed by the claim rule.
  const HttpAnswer keyed = post_job(
      a.port(), R"({"kind":"sleep","args":{"ms":20},"priority":"high","timeout_ms":1000,"idempotency_key":"short-1"})");
  CHECK(keyed.status == 200);
  CHECK(text(json_of(keyed), "state") == "completed");

  const HttpAnswer long_one = post_job(a.port(), R"({"kind":"sleep","args":{"ms":1500},"timeout_ms":1000})");
  CHECK(long_one.status == 503);
  CHECK(text(json_of(long_one), "reason") == "deadline_implausible");
  // A stated size beats the one its args imply.
  const HttpAnswer stated = post_job(
      a.port(), R"({"kind":"sleep","args":{"ms":10},"expected_ms":2000,"timeout_ms":1000,"idempotency_key":"stated-1"})");
  CHECK(stated.status == 503);
  CHECK(text(json_of(stated), "reason") == "deadline_implausible");
}

TEST_CASE("a queued job counts its own size as work ahead, in its class" * doctest::timeout(120)) {
  ClusterFixture c;
  // Nobody serves spin: its jobs stay queued, counted in the cluster's counters.
  DaemonProcess& a = c.node({"sleep"}, 1);
  CAPTURE(a.log());
  submit_later(a.port(), R"({"kind":"spin","args":{"ms":5},"priority":"high"})");
  submit_later(a.port(), R"({"kind":"spin","args":{"ms":2000}})");
  submit_later(a.port(), R"({"kind":"spin","args":{"ms":5},"expected_ms":300})");
  submit_later(a.port(), R"({"kind":"spin","args":{"ms":40},"priority":"sheddable","idempotency_key":"k-1"})");
  CHECK(c.pg.scalar("SELECT sum(work_us) FROM sandglass_counters WHERE priority = 1") == "5000");
  CHECK(c.pg.scalar("SELECT sum(work_us) FROM sandglass_counters WHERE priority = 2") == "2300000");
  CHECK(c.pg.scalar("SELECT sum(work_us) FROM sandglass_counters WHERE priority = 3") == "40000");
  CHECK(c.pg.scalar("SELECT sum(work_us) FROM sandglass_jobs") == "2345000");
}

}  // TEST_SUITE
