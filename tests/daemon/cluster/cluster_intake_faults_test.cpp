// The intake of a cluster node under database faults: a PostgreSQL restart, a DBA's row lock, a
// waiter whose NOTIFY never comes, a connection lost while a submission's COMMIT was under way.
// Each request gets an answer, and each accepted submission exactly one row.
#include "cluster/cluster_fixture.hpp"
#include "cluster/held_session.hpp"
#include "cluster/tcp_proxy.hpp"

#include <doctest/doctest.h>

#include <future>

using namespace sandglass::testing;
using namespace std::chrono_literals;

namespace {

const std::string kSleep = R"({"kind":"sleep","args":{"ms":5}})";

}  // namespace

TEST_SUITE("cluster") {

TEST_CASE("after a PostgreSQL restart the first request on each intake thread is served, on a new "
          "session" * doctest::timeout(120)) {
  ClusterFixture c;
  DaemonProcess& a = c.node({"sleep"});
  CAPTURE(a.log());
  const std::uint64_t id = submit_later(a.port(), kSleep);
  // Both intake threads hold a session: concurrent reads are spread over them.
  std::vector<std::future<HttpAnswer>> reads;
  for (int i = 0; i < 16; ++i) {
    reads.push_back(std::async(std::launch::async, [&] {
      return http(a.port(), "GET", "/v1/jobs/" + std::to_string(id));
    }));
  }
  for (auto& r : reads) REQUIRE(r.get().status == 200);

  c.pg.stop();
  c.pg.start();
  REQUIRE(eventually([&] { return http(a.port(), "GET", "/readyz").status == 200; }, 30s));

  // Each of the first requests lands on an intake thread whose session the restart broke.
  for (int i = 0; i < 4; ++i) {
    const HttpAnswer read = http(a.port(), "GET", "/v1/jobs/" + std::to_string(id));
    CHECK(read.status == 200);
    const HttpAnswer posted = post_job(a.port(), kSleep);
    CHECK(posted.status == 200);
    CHECK(text(json_of(posted), "state") == "completed");
  }
  CHECK(c.pg.scalar("SELECT count(*) FROM sandglass_jobs") == "5");
}

TEST_CASE("a DBA's lock on a job row: the requests it blocks answer within the lock timeout and "
          "the others are served meanwhile" * doctest::timeout(120)) {
  ClusterFixture c;
  // The default timeouts (a lock waited for at most 2 s). Spin: a kind nobody claims, so that
  // the locked job stays queued.
  DaemonProcess& a = c.node({"sleep"});
  CAPTURE(a.log());
  const std::string keyed = R"({"kind":"spin","args":{"ms":5},"idempotency_key":"locked-1"})";
  const std::uint64_t id = submit_later(a.port(), keyed);
  HeldSession dba{c.pg.conninfo()};
  dba.exec("BEGIN");
  dba.exec("SELECT * FROM sandglass_jobs WHERE id = " + std::to_string(id) + " FOR UPDATE");

  // One blocked request per intake thread and one more: each answers 503, none hangs.
  std::vector<std::future<HttpAnswer>> cancels;
  for (int i = 0; i < 3; ++i) {
    cancels.push_back(std::async(std::launch::async, [&] {
      return http(a.port(), "DELETE", "/v1/jobs/" + std::to_string(id));
    }));
  }
  const HttpAnswer attach = post_job(a.port(), keyed);  // marks the job awaited: waits for the row
  for (auto& f : cancels) {
    const HttpAnswer r = f.get();
    CHECK(r.status == 503);
    CHECK(text(json_of(r), "error").find("timeouts") != std::string::npos);
  }
  CHECK(attach.status == 503);
  // Reads do not wait for row locks; other submissions are served.
  CHECK(text(record(a.port(), id), "state") == "queued");
  const HttpAnswer other = post_job(a.port(), kSleep);
  CHECK(other.status == 200);
  CHECK(text(json_of(other), "state") == "completed");

  dba.exec("COMMIT");
  const HttpAnswer cancelled = http(a.port(), "DELETE", "/v1/jobs/" + std::to_string(id));
  CHECK(cancelled.status == 200);
  CHECK(text(json_of(cancelled), "state") == "cancelled");
}

TEST_CASE("a waiter whose outcome's NOTIFY never comes is answered from the row once its deadline "
          "and the reserve have passed" * doctest::timeout(120)) {
  ClusterFixture c;
  DaemonProcess& a = c.node({"sleep"});
  CAPTURE(a.log());
  const std::string listener_pid =
      "SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'sandglassd %' AND query "
      "LIKE 'LISTEN%'";
  REQUIRE(eventually([&] { return c.pg.query(listener_pid).size() == 1; }));
  const std::string old_pid = c.pg.scalar(listener_pid);

  // Waiting for a job nobody claims (spin), with 1.5 s of budget.
  auto answer = std::async(std::launch::async, [&] {
    return post_job(a.port(), R"({"kind":"spin","args":{"ms":5},"timeout_ms":1500})");
  });
  REQUIRE(eventually([&] { return c.pg.scalar("SELECT count(*) FROM sandglass_jobs") == "1"; }));

  // The listener loses its session and resyncs on a new one; then the job ends without a NOTIFY.
  c.pg.execute("SELECT pg_terminate_backend(" + old_pid + ")");
  REQUIRE(eventually([&] {
    return c.pg.scalar("SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE "
                       "'sandglassd %' AND query LIKE '%cancel_requested%' AND pid <> " +
                       old_pid) == "1";
  }));
  c.pg.execute("UPDATE sandglass_jobs SET state = 'done', outcome_state = 'failed', reason = "
               "'handler_error', error = 'ended by hand', finished_at = clock_timestamp()");

  const HttpAnswer r = answer.get();
  CHECK(r.status == 500);
  CHECK(text(json_of(r), "state") == "failed");
  CHECK(text(json_of(r), "error") == "ended by hand");
  CHECK(metric(a.port(), "sandglass_cluster_waits_timed_total") == 1);
}

TEST_CASE("a submission whose connection broke after its COMMIT was sent is answered with its job, "
          "found by its intake token, and runs once" * doctest::timeout(120)) {
  ClusterFixture c;
  TcpProxy proxy{c.pg.port()};
  DaemonProcess& a = c.node_through(proxy.port(), {"sleep"});
  CAPTURE(a.log());
  c.log_outcomes();
  REQUIRE(post_job(a.port(), kSleep).status == 200);  // the intake's sessions are open
  c.pg.execute("DELETE FROM sandglass_jobs; DELETE FROM outcome_log");

  // Submissions wait for this lock inside their transaction (functions.sql, "Hungry nodes").
  HeldSession holder{c.pg.conninfo()};
  holder.exec("SELECT pg_advisory_lock(7170734562315111683)");
  auto answer = std::async(std::launch::async, [&] {
    return post_job(a.port(), kSleep, {}, "?wait=false");
  });
  REQUIRE(eventually([&] {
    return c.pg.scalar("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                       "AND query LIKE '%sandglass_submit_claim%'") == "1";
  }));
  // The node loses its connections and cannot open new ones yet; its statement goes on and
  // commits, its answer dropped.
  proxy.hold_new(true);
  proxy.cut();
  holder.exec("SELECT pg_advisory_unlock(7170734562315111683)");
  REQUIRE(eventually([&] { return c.pg.scalar("SELECT count(*) FROM sandglass_jobs") == "1"; }));
  proxy.hold_new(false);

  const HttpAnswer r = answer.get();
  REQUIRE(r.status == 202);
  const std::uint64_t id = id_of(r);
  CHECK(c.pg.scalar("SELECT id FROM sandglass_jobs") == std::to_string(id));
  CHECK(metric(a.port(), "sandglass_cluster_intake_settled_total") == 1);
  REQUIRE(eventually([&] { return state_of(a.port(), id) == "completed"; }, 30s));
  CHECK(c.pg.scalar("SELECT count(*) FROM sandglass_jobs") == "1");
  CHECK(c.pg.scalar("SELECT count(*) FROM outcome_log") == "1");
}

}  // TEST_SUITE
