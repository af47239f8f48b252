// Cluster admission: the queue's capacity is reserved atomically by concurrent batches of
// several nodes, and the work queued ahead is divided only by the workers of the live nodes
// that serve the job's kind (migrations/functions.sql, "Admission and intake").
#include "cluster/cluster_fixture.hpp"

#include <doctest/doctest.h>

#include <future>

using namespace sandglass::testing;
using namespace std::chrono_literals;

TEST_SUITE("cluster") {

TEST_CASE("concurrent batches on two nodes admit exactly the cluster's capacity, no more" *
          doctest::timeout(120)) {
  ClusterFixture c;
  // Capacity 8 each: 16 places in the cluster's queue. Nobody claims spin: its jobs stay queued.
  DaemonProcess& a = c.node({"sleep"}, 2, "capacity = 8");
  DaemonProcess& b = c.node({"sleep"}, 2, "capacity = 8");
  CAPTURE(a.log());
  std::vector<std::future<HttpAnswer>> answers;
  for (int i = 0; i < 64; ++i) {
    const std::uint16_t port = i % 2 == 0 ? a.port() : b.port();
    answers.push_back(std::async(std::launch::async, [port] {
      return post_job(port, R"({"kind":"spin","args":{"ms":5}})", {}, "?wait=false");
    }));
  }
  int accepted = 0, full = 0;
  for (auto& f : answers) {
    const HttpAnswer r = f.get();
    if (r.status == 202) ++accepted;
    if (text(json_of(r), "reason") == "queue_full") ++full;
  }
  CHECK(accepted == 16);
  CHECK(full == 48);
  CHECK(c.pg.scalar("SELECT count(*) FROM sandglass_jobs") == "16");
}

TEST_CASE("work queued ahead is divided only by the workers of the nodes that serve the kind" *
          doctest::timeout(120)) {
  ClusterFixture c;
  DaemonProcess& a = c.node({"sleep"}, 1);     // the only sleep worker
  DaemonProcess& b = c.node({"spin"}, 8);      // eight workers, none for sleep
  CAPTURE(a.log());
  CAPTURE(b.log());
  // A learns sleep's run time (about 300 ms).
  for (int i = 0; i < 3; ++i) {
    REQUIRE(post_job(a.port(), R"({"kind":"sleep","args":{"ms":300}})").status == 200);
  }
  // 6 s of normal-class work queued ahead (as a departed node's counters would hold it).
  c.pg.execute("INSERT INTO sandglass_counters (node, priority, queued, work_us) "
               "VALUES ('elsewhere', 2, 0, 6000000)");
  // Across nine workers it would be 0.67 s ahead; across the one sleep worker, 6 s: a job
  // with 3 s left cannot finish in time.
  const HttpAnswer r = post_job(a.port(), R"({"kind":"sleep","args":{"ms":300},"timeout_ms":3000})");
  CHECK(text(json_of(r), "reason") == "deadline_implausible");
}

}  // TEST_SUITE
