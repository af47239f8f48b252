// Delayed starts and retries on cluster nodes: a delayed job is a `scheduled` row until its start
// (by the database's clock), no work ahead of anyone meanwhile, cancellable, waited for across
// its delay, and admitted at its start like a submission (or rejected with the admission's
// reason); a job with a retry is retried on the node that claimed it, and every node answers its
// attempts.
#include "cluster/cluster_fixture.hpp"

#include <doctest/doctest.h>

#include <boost/json/array.hpp>

#include <filesystem>
#include <string>

using namespace sandglass::testing;

namespace {

// A [commands] table for the exec kind, appended to a node's [cluster] table: `flaky` fails
// until it has run three times (a counter in a file of its own), `fail` always exits 3. Only
// shell builtins: the commands get no PATH.
std::string flaky_commands() {
  const std::string counter = write_temp_file("cluster_flaky_counter", "");
  std::filesystem::remove(counter);
  return "[commands.flaky]\nargv = [\"/bin/sh\", \"-c\", \"n=0; [ -f " + counter + " ] && read n < " +
         counter + "; n=$((n+1)); echo $n > " + counter + "; [ $n -ge 3 ]\"]\n"
         "[commands.fail]\nargv = [\"/bin/sh\", \"-c\", \"exit 3\"]\n";
}

std::string reason_of(const boost::json::object& attempt) {
  return std::string{attempt.at("reason").as_string()};
}

}  // namespace

TEST_SUITE("cluster") {

TEST_CASE("a delayed cluster job is scheduled until its start, waited for across it, and starts no earlier" *
          doctest::timeout(120)) {
  ClusterFixture c;
  DaemonProcess& a = c.node({"sleep"});
  DaemonProcess& b = c.node({"sleep", "spin"});

  const HttpAnswer posted = post_job(
      a.port(), R"({"kind":"sleep","args":{"ms":5},"priority":"high","timeout_ms":5000,"delay_ms":700})",
      {}, "?wait=false");
  REQUIRE(posted.status == 202);
  CHECK(text(json_of(posted), "state") == "scheduled");
  const std::uint64_t id = id_of(posted);
  const std::string path = "/v1/jobs/" + std::to_string(id);
  CHECK(text(record(b.port(), id), "state") == "scheduled");
  CHECK(c.pg.scalar("SELECT state FROM sandglass_jobs WHERE id = " + std::to_string(id)) == "scheduled");

  // Waited for from the other node across the delay: answered once it ran.
  const HttpAnswer waited = http(b.port(), "GET", path + "?wait=true");
  REQUIRE(waited.status == 200);
  CHECK(text(json_of(waited), "state") == "completed");
  // Claimed no earlier than its delay after its insert, by the database's clock; its deadline
  // counts its budget from its start.
  CHECK(c.pg.scalar("SELECT claimed_at >= created_at + interval '700 milliseconds' "
                    "FROM sandglass_jobs WHERE id = " + std::to_string(id)) == "t");
  CHECK(c.pg.scalar("SELECT deadline - start_at > interval '4 seconds' AND start_at - created_at = "
                    "interval '700 milliseconds' FROM sandglass_jobs WHERE id = " + std::to_string(id)) == "t");

  // A scheduled job is cancelled at once, as a queued one is, from any node.
  const std::uint64_t later = submit_later(
      a.port(), R"({"kind":"sleep","args":{"ms":5},"priority":"sheddable","timeout_ms":1000,"delay_ms":60000})");
  const HttpAnswer del = http(b.port(), "DELETE", "/v1/jobs/" + std::to_string(later));
  REQUIRE(del.status == 200);
  const auto cancelled = json_of(del);
  CHECK(text(cancelled, "state") == "cancelled");
  CHECK(text(cancelled, "reason") == "cancelled_in_queue");
  CHECK(text(cancelled, "cause") == "caller");
  // In no counter: the counters' sums (over every node's rows) are back to nothing queued.
  CHECK(c.pg.scalar("SELECT coalesce(sum(queued), 0) FROM sandglass_counters") == "0");

  // An idempotency key names the scheduled job, as it names a queued one.
  const std::string keyed =
      R"({"kind":"sleep","args":{"ms":5},"timeout_ms":1000,"delay_ms":60000,"idempotency_key":"d-1"})";
  const std::uint64_t first = submit_later(a.port(), keyed);
  const HttpAnswer again = post_job(b.port(), keyed, {}, "?wait=false");
  REQUIRE(again.status == 202);
  CHECK(id_of(again) == first);
  CHECK(text(json_of(again), "state") == "scheduled");
  CHECK(text(record(a.port(), first), "state") == "scheduled");
}

TEST_CASE("delayed cluster jobs are no work ahead until their start: an immediate job is admitted while many wait" *
          doctest::timeout(120)) {
  ClusterFixture c;
  DaemonProcess& a = c.node({"sleep"}, 1, "capacity = 2");
  c.node({"sleep"}, 1, "capacity = 2");
  // Three times the cluster's capacity of delayed jobs in one batch, of mixed classes.
  std::string jobs;
  for (int i = 0; i < 12; ++i) {
    jobs += std::string{i == 0 ? "" : ","} + R"({"kind":"sleep","args":{"ms":5},"priority":")" +
            (i % 2 == 0 ? "high" : "normal") + R"(","timeout_ms":2000,"delay_ms":60000})";
  }
  const HttpAnswer batch = http(a.port(), "POST", "/v1/jobs/batch", R"({"jobs":[)" + jobs + "]}");
  REQUIRE(batch.status == 200);
  const boost::json::object answered = json_of(batch);
  for (const auto& item : answered.at("jobs").as_array()) {
    CHECK(text(item.as_object(), "state") == "scheduled");
  }
  CHECK(c.pg.scalar("SELECT count(*) FROM sandglass_jobs WHERE state = 'scheduled'") == "12");
  // /v1/stats counts them, per class, apart from the queue.
  const boost::json::object totals =
      json_of(http(a.port(), "GET", "/v1/stats")).at("cluster").at("jobs").as_object();
  CHECK(totals.at("scheduled").at("high").to_number<std::int64_t>() == 6);
  CHECK(totals.at("scheduled").at("normal").to_number<std::int64_t>() == 6);
  CHECK(totals.at("scheduled").at("total").to_number<std::int64_t>() == 12);
  CHECK(totals.at("queued").at("total").to_number<std::int64_t>() == 0);
  const auto r = json_of(post_job(
      a.port(), R"({"kind":"sleep","args":{"ms":5},"priority":"sheddable","timeout_ms":5000})"));
  CHECK(text(r, "state") == "completed");
}

TEST_CASE("a delayed cluster job that no longer fits at its start ends rejected with the admission's reason" *
          doctest::timeout(120)) {
  ClusterFixture c;
  // The nodes run only sleep: spin jobs stay queued and fill the cluster's capacity, that of its
  // live nodes: 2 x 2 at the most. (A node late with its beat on a loaded machine counts for
  // nothing meanwhile: the fill goes on until all 4 places are taken.)
  DaemonProcess& a = c.node({"sleep"}, 1, "capacity = 2");
  c.node({"sleep"}, 1, "capacity = 2");
  int queued = 0;
  REQUIRE(eventually([&] {
    const HttpAnswer r = post_job(
        a.port(), R"({"kind":"spin","args":{"ms":5},"priority":"critical","timeout_ms":30000})", {},
        "?wait=false");
    if (r.status == 202) ++queued;
    return queued == 4;
  }));
  CHECK(text(json_of(post_job(a.port(), R"({"kind":"spin","args":{"ms":5},"timeout_ms":30000})")),
             "reason") == "queue_full");
  const std::uint64_t id = submit_later(
      a.port(), R"({"kind":"sleep","args":{"ms":5},"timeout_ms":5000,"delay_ms":300})");
  const HttpAnswer waited = http(a.port(), "GET", "/v1/jobs/" + std::to_string(id) + "?wait=true");
  REQUIRE(waited.status == 200);
  const auto o = json_of(waited);
  CHECK(text(o, "state") == "rejected");
  CHECK(text(o, "reason") == "queue_full");
  CHECK(c.pg.scalar("SELECT claimed_at IS NULL FROM sandglass_jobs WHERE id = " + std::to_string(id)) == "t");
}

TEST_CASE("a cluster job that fails twice then succeeds shows its three attempts on every node" *
          doctest::timeout(120)) {
  ClusterFixture c;
  DaemonProcess& runner = c.node({"exec"}, 2, {}, flaky_commands());
  DaemonProcess& reader = c.node({"sleep"}, 2, {}, flaky_commands());
  const std::uint64_t id = submit_later(
      reader.port(),
      R"({"kind":"exec","args":{"command":"flaky"},"priority":"high","timeout_ms":20000,)"
      R"("retry":{"max_attempts":5,"backoff_ms":1}})");
  const HttpAnswer waited = http(reader.port(), "GET", "/v1/jobs/" + std::to_string(id) + "?wait=true");
  REQUIRE(waited.status == 200);
  const auto o = json_of(waited);
  CHECK(text(o, "state") == "completed");
  CHECK(text(o, "node") == ClusterFixture::name_of(runner));
  CHECK(o.at("attempt").as_int64() == 1);  // one claim: the retries ran within it
  const auto& attempts = o.at("attempts").as_array();
  REQUIRE(attempts.size() == 3);
  CHECK(reason_of(attempts[0].as_object()) == "handler_error");
  CHECK(reason_of(attempts[1].as_object()) == "handler_error");
  CHECK(reason_of(attempts[2].as_object()) == "ok");
  CHECK_FALSE(o.contains("retry_stopped"));
  CHECK(record(runner.port(), id) == record(reader.port(), id));
  // Counted where they ran.
  CHECK(metric(runner.port(), R"(sandglass_retries_total{kind="exec"})") == 2);
}

TEST_CASE("a cluster job's retries stop when the budget left cannot fit another attempt" *
          doctest::timeout(120)) {
  ClusterFixture c;
  DaemonProcess& runner = c.node({"exec"}, 2, {}, flaky_commands());
  DaemonProcess& reader = c.node({"sleep"}, 2, {}, flaky_commands());
  const std::uint64_t id = submit_later(
      reader.port(), R"({"kind":"exec","args":{"command":"fail"},"timeout_ms":2000,)"
                     R"("retry":{"max_attempts":4,"backoff_ms":1000000000}})");
  const HttpAnswer waited = http(reader.port(), "GET", "/v1/jobs/" + std::to_string(id) + "?wait=true");
  REQUIRE(waited.status == 200);
  const auto o = json_of(waited);
  CHECK(text(o, "state") == "failed");
  CHECK(text(o, "reason") == "retry_skipped_budget");
  CHECK(text(o, "retry_stopped") == "retry_skipped_budget");
  REQUIRE(o.at("attempts").as_array().size() == 1);
  CHECK(reason_of(o.at("attempts").as_array()[0].as_object()) == "handler_error");
  // max_attempts reached: the last failure is the answer.
  const std::uint64_t spent = submit_later(
      reader.port(), R"({"kind":"exec","args":{"command":"fail"},"priority":"sheddable",)"
                     R"("timeout_ms":20000,"retry":{"max_attempts":2,"backoff_ms":0}})");
  const auto s = json_of(http(reader.port(), "GET", "/v1/jobs/" + std::to_string(spent) + "?wait=true"));
  CHECK(text(s, "retry_stopped") == "attempts_exhausted");
  CHECK(s.at("attempts").as_array().size() == 2);
  CHECK(metric(runner.port(),
               R"(sandglass_retry_stops_total{kind="exec",reason="attempts_exhausted"})") == 1);
  CHECK(metric(runner.port(),
               R"(sandglass_retry_stops_total{kind="exec",reason="retry_skipped_budget"})") == 1);
}

}  // TEST_SUITE
