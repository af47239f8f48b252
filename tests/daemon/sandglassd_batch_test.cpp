// POST /v1/jobs/batch against the real sandglassd: each job of a batch gets its own admission
// decision and the answer lists them in order; a malformed item refuses the whole batch, naming
// its place, and submits nothing.
#include "daemon_test_support.hpp"

#include <doctest/doctest.h>

#include <boost/json/array.hpp>

#include <string>

using namespace sandglass::testing;
using boost::json::object;

namespace {

HttpAnswer post_batch(std::uint16_t port, const std::string& body, const std::string& query = {}) {
  return http(port, "POST", "/v1/jobs/batch" + query, body);
}

std::uint64_t id_in(const object& item) { return item.at("id").to_number<std::uint64_t>(); }

}  // namespace

TEST_SUITE("sandglassd batch submit") {
  TEST_CASE("a batch answers each job's own admission decision in the order of its jobs" *
            doctest::timeout(60)) {
    DaemonProcess d{{"--workers", "1", "--capacity", "1"}};
    // The only worker is busy for the whole test: what the batch queues stays queued.
    const std::uint64_t busy = id_of(
        post_job(d.port(), R"({"kind":"sleep","args":{"ms":20000},"timeout_ms":60000})", {}, "?wait=false"));
    REQUIRE(eventually([&] { return state_of(d.port(), busy) == "running"; }));

    const HttpAnswer a = post_batch(d.port(), R"({"jobs":[
      {"kind":"sleep","args":{"ms":100},"idempotency_key":"k1","timeout_ms":40000},
      {"kind":"sleep","args":{"ms":100},"idempotency_key":"k1","timeout_ms":40000},
      {"kind":"sleep","args":{"ms":200},"idempotency_key":"k1","timeout_ms":40000},
      {"kind":"spin","args":{"ms":5},"priority":"sheddable","timeout_ms":40000},
      {"kind":"sleep","args":{"ms":5},"timeout_ms":2},
      {"kind":"spin","args":{"ms":1},"priority":"critical","timeout_ms":40000}]})");
    REQUIRE(a.status == 200);
    const boost::json::array items = json_of(a).at("jobs").as_array();
    REQUIRE(items.size() == 6);

    // Queued; then the same request with its key attaches to it; the key with other args is a
    // conflict.
    const object& queued = items[0].as_object();
    CHECK(queued.at("status").as_int64() == 202);
    CHECK(queued.at("state").as_string() == "queued");
    const object& attached = items[1].as_object();
    CHECK(attached.at("status").as_int64() == 202);
    CHECK(id_in(attached) == id_in(queued));
    const object& conflict = items[2].as_object();
    CHECK(conflict.at("status").as_int64() == 409);
    CHECK(conflict.at("field").as_string() == "idempotency_key");
    // The queue (capacity 1) is full and nothing of a lower class is in it.
    const object& full = items[3].as_object();
    CHECK(full.at("status").as_int64() == 503);
    CHECK(full.at("state").as_string() == "rejected");
    CHECK(full.at("reason").as_string() == "queue_full");
    CHECK(full.at("kind").as_string() == "spin");
    const object& small = items[4].as_object();
    CHECK(small.at("state").as_string() == "rejected");
    CHECK(small.at("reason").as_string() == "budget_too_small");
    // A critical job sheds the queued normal one.
    const object& critical = items[5].as_object();
    CHECK(critical.at("status").as_int64() == 202);
    CHECK(critical.at("state").as_string() == "queued");

    const object shed = json_of(http(d.port(), "GET", "/v1/jobs/" + std::to_string(id_in(queued))));
    CHECK(shed.at("state").as_string() == "rejected");
    CHECK(shed.at("reason").as_string() == "shed");
    CHECK(state_of(d.port(), id_in(critical)) == "queued");
    CHECK(id_in(full) != id_in(small));
  }

  TEST_CASE("a malformed item refuses the whole batch naming its place and submits nothing" *
            doctest::timeout(60)) {
    const std::string config = write_temp_file("batch.toml", "[server]\nmax_batch = 3\n");
    DaemonProcess d{{"--config", config}};
    const std::string good = R"({"kind":"sleep","args":{"ms":1}})";
    const std::pair<std::string, std::string> cases[] = {
        {R"({"jobs":[)" + good + R"(,{"kind":"sleep","args":{"ms":"x"}}]})", "jobs[1].args.ms"},
        {R"({"jobs":[)" + good + "," + good + R"(,{"kind":"nope"}]})", "jobs[2].kind"},
        {R"({"jobs":[)" + good + R"(,{"kind":"sleep","kind":"spin"}]})", "jobs[1].kind"},
        {R"({"jobs":[{"kind":"sleep","max_retries":3}]})", "jobs[0].max_retries"},
        {R"({"jobs":[{"args":{"ms":1}}]})", "jobs[0].kind"},
        {R"({"jobs":[7]})", "jobs[0].body"},
        {R"({"jobs":[]})", "jobs"},
        {R"({"jobs":[)" + good + "," + good + "," + good + "," + good + "]}", "jobs"},
        {R"([{"kind":"sleep"}])", "body"},
        {R"({"jobs":[],"wait":true})", "wait"},
    };
    for (const auto& [body, field] : cases) {
      CAPTURE(body);
      const HttpAnswer a = post_batch(d.port(), body);
      CHECK(a.status == 400);
      CHECK(json_of(a).at("field").as_string() == field);
    }
    // A batch never waits for outcomes.
    const HttpAnswer waiting = post_batch(d.port(), R"({"jobs":[)" + good + "]}", "?wait=true");
    CHECK(waiting.status == 400);
    CHECK(json_of(waiting).at("field").as_string() == "query");
    CHECK(http(d.port(), "GET", "/v1/jobs/batch").status == 405);
    // Nothing was submitted.
    CHECK(metric(d.port(), R"(sandglass_jobs_submitted_total{kind="sleep",priority="normal"})") <= 0);
    CHECK(json_of(http(d.port(), "GET", "/v1/jobs")).at("jobs").as_array().empty());

    const HttpAnswer ok = post_batch(d.port(), R"({"jobs":[)" + good + "," + good + "]}");
    REQUIRE(ok.status == 200);
    CHECK(json_of(ok).at("jobs").as_array().size() == 2);
  }
}
