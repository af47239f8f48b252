// POST /v1/jobs/batch, GET /v1/jobs/ID?wait=true and DELETE /v1/jobs/ID on cluster nodes: a
// batch is one insert with one admission decision per job; a GET that waits answers when the
// job ends (wherever it runs) or at its deadline plus the reserve; a DELETE answers as a lone
// daemon's does.
#include "cluster/cluster_fixture.hpp"

#include <doctest/doctest.h>

#include <boost/json/array.hpp>

#include <chrono>
#include <set>

using namespace sandglass::testing;
using namespace std::chrono_literals;

TEST_SUITE("cluster") {

TEST_CASE("a batch on a cluster node answers each job's own decision in order, and a malformed one inserts nothing" *
          doctest::timeout(120)) {
  ClusterFixture c;
  DaemonProcess& a = c.node({"sleep"}, 1);
  c.node({"spin"}, 1);

  const HttpAnswer bad = http(a.port(), "POST", "/v1/jobs/batch",
                              R"({"jobs":[{"kind":"sleep","args":{"ms":1}},{"kind":"spin","args":{"ms":"x"}}]})");
  CHECK(bad.status == 400);
  CHECK(text(json_of(bad), "field") == "jobs[1].args.ms");
  CHECK(c.pg.scalar("SELECT count(*) FROM sandglass_jobs") == "0");

  const HttpAnswer r = http(a.port(), "POST", "/v1/jobs/batch", R"({"jobs":[
    {"kind":"sleep","args":{"ms":1},"timeout_ms":30000},
    {"kind":"spin","args":{"ms":1},"priority":"critical","timeout_ms":30000},
    {"kind":"sleep","args":{"ms":1},"timeout_ms":2},
    {"kind":"sleep","args":{"ms":50},"priority":"sheddable","idempotency_key":"b-1","timeout_ms":30000},
    {"kind":"sleep","args":{"ms":50},"priority":"sheddable","idempotency_key":"b-1","timeout_ms":30000}]})");
  REQUIRE(r.status == 200);
  const boost::json::array items = json_of(r).at("jobs").as_array();
  REQUIRE(items.size() == 5);
  std::set<std::uint64_t> ids;
  for (const std::size_t i : {0u, 1u, 3u, 4u}) {
    CAPTURE(i);
    const auto& item = items[i].as_object();
    CHECK(item.at("status").as_int64() == 202);
    const std::string state = text(item, "state");
    CHECK((state == "queued" || state == "running"));
    ids.insert(item.at("id").to_number<std::uint64_t>());
  }
  CHECK(ids.size() == 3);  // the second keyed job is the first one
  CHECK(items[3].as_object().at("id") == items[4].as_object().at("id"));
  // Too little budget: refused by the node itself, never inserted.
  CHECK(text(items[2].as_object(), "state") == "rejected");
  CHECK(text(items[2].as_object(), "reason") == "budget_too_small");
  CHECK(c.pg.scalar("SELECT count(*) FROM sandglass_jobs") == "3");
  // Each runs on the node that serves its kind.
  for (const std::uint64_t id : ids) {
    CAPTURE(id);
    REQUIRE(eventually([&] { return text(record(a.port(), id), "state") == "completed"; }));
  }
}

TEST_CASE("a cluster GET that waits answers when its job ends on another node" * doctest::timeout(120)) {
  ClusterFixture c;
  DaemonProcess& runner = c.node({"sleep"});
  DaemonProcess& reader = c.node({"spin"});
  const std::uint64_t id =
      submit_later(runner.port(), R"({"kind":"sleep","args":{"ms":300},"timeout_ms":30000})");
  const HttpAnswer a = http(reader.port(), "GET", "/v1/jobs/" + std::to_string(id) + "?wait=true");
  CHECK(a.status == 200);
  const auto o = json_of(a);
  CHECK(text(o, "state") == "completed");
  CHECK(text(o, "node") == ClusterFixture::name_of(runner));
  // A job that is over is answered at once, and an unknown one is 404.
  CHECK(json_of(http(reader.port(), "GET", "/v1/jobs/" + std::to_string(id) + "?wait=true")) == o);
  CHECK(http(reader.port(), "GET", "/v1/jobs/999999?wait=true").status == 404);
  CHECK(http(reader.port(), "GET", "/v1/jobs/" + std::to_string(id) + "?wait=true&x=1").status == 400);
}

TEST_CASE("a cluster GET that waits for a job past its commit point answers at its deadline plus the reserve" *
          doctest::timeout(120)) {
  ClusterFixture c;
  DaemonProcess& n = c.node({"sleep"}, 2, "[budget]\nreserve_ms = 20");
  // Committed after 10 ms, it sleeps on past its 400 ms budget: no cancellation stops it. It
  // says it is short (expected_ms), so that admission takes it.
  const std::uint64_t id = submit_later(
      n.port(), R"({"kind":"sleep","expected_ms":1,"args":{"ms":5000,"commit_at_ms":10},"timeout_ms":400})");
  const HttpAnswer a = http(n.port(), "GET", "/v1/jobs/" + std::to_string(id) + "?wait=true");
  CHECK(a.status == 200);
  const auto o = json_of(a);
  CHECK(text(o, "state") == "running");
  // remaining_ms is the job's deadline (arrival + budget - reserve) less the database's clock:
  // the answer came no earlier than the reserve after it.
  CHECK(o.at("timings").as_object().at("remaining_ms").as_int64() <= -20);
}

TEST_CASE("a cluster DELETE of a running job answers 200 with its final record, or 202 cancelling past its commit point" *
          doctest::timeout(120)) {
  ClusterFixture c;
  DaemonProcess& runner = c.node({"sleep"});
  DaemonProcess& other = c.node({"spin"});
  const std::uint64_t id =
      submit_later(runner.port(), R"({"kind":"sleep","args":{"ms":20000},"timeout_ms":60000})");
  REQUIRE(eventually([&] { return text(record(other.port(), id), "state") == "running"; }));
  const HttpAnswer del = http(other.port(), "DELETE", "/v1/jobs/" + std::to_string(id));
  const auto d = json_of(del);
  if (del.status == 200) {  // ended within the DELETE's short wait: its final record
    CHECK(text(d, "state") == "cancelled");
    CHECK(text(d, "reason") == "cancelled_while_running");
    CHECK(text(d, "cause") == "caller");
  } else {  // a slow node: not yet
    CHECK(del.status == 202);
    CHECK(text(d, "state") == "cancelling");
  }
  REQUIRE(eventually([&] { return text(record(other.port(), id), "state") == "cancelled"; }));

  // Past its commit point a job runs on: the DELETE cannot end it, and says so.
  const std::uint64_t committed = submit_later(
      runner.port(), R"({"kind":"sleep","args":{"ms":3000,"commit_at_ms":1},"timeout_ms":60000})");
  REQUIRE(eventually([&] { return record(other.port(), committed).at("committed").as_bool(); }));
  const HttpAnswer cancelling = http(other.port(), "DELETE", "/v1/jobs/" + std::to_string(committed));
  CHECK(cancelling.status == 202);
  CHECK(text(json_of(cancelling), "state") == "cancelling");
  CHECK(text(json_of(cancelling), "cause") == "caller");
  CHECK(json_of(cancelling).at("id").to_number<std::uint64_t>() == committed);
  const HttpAnswer ended = http(other.port(), "GET", "/v1/jobs/" + std::to_string(committed) + "?wait=true");
  CHECK(text(json_of(ended), "state") == "completed");
  CHECK(text(json_of(ended), "reason") == "completed_after_cancel");
}

}  // TEST_SUITE
