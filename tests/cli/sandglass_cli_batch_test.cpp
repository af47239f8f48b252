// `sandglass submit-batch` against a real sandglassd on an ephemeral loopback port: a file of
// mixed kinds, classes, budgets and a delay posted as one batch, one line per job, and every
// exit code it can give.
#include "cli_process.hpp"
#include "daemon_test_support.hpp"

#include <doctest/doctest.h>

#include <boost/json/parse.hpp>

#include <string>

using namespace sandglass::testing;

namespace {

CliResult cli(std::uint16_t port, std::vector<std::string> args) {
  args.insert(args.begin(), {"--url", url_of(port)});
  return run_cli(args);
}

}  // namespace

TEST_SUITE("sandglass CLI") {
  TEST_CASE("submit-batch prints one line per job and exits 0 when every job was admitted" *
            doctest::timeout(60)) {
    DaemonProcess d;
    const std::string file = write_temp_file("batch.json", R"({"jobs":[
      {"kind":"sleep","args":{"ms":5},"timeout_ms":5000},
      {"kind":"spin","args":{"ms":1},"priority":"critical","timeout_ms":2000},
      {"kind":"sleep","args":{"ms":1},"priority":"sheddable","delay_ms":60000}]})");
    const CliResult r = cli(d.port(), {"submit-batch", file});
    CHECK(r.exit_code == 0);
    CHECK(r.out == "job 1: queued\njob 2: queued\njob 3: scheduled\n");
    CHECK(r.err.empty());

    // A bare array works too; --json prints the daemon's answer as it came.
    const std::string bare = write_temp_file("bare.json", R"([{"kind":"sleep","args":{"ms":1}}])");
    const CliResult j = cli(d.port(), {"--json", "submit-batch", bare});
    CHECK(j.exit_code == 0);
    const auto answer = boost::json::parse(j.out).as_object();
    REQUIRE(answer.at("jobs").as_array().size() == 1);
    CHECK(answer.at("jobs").as_array()[0].as_object().at("id").as_int64() == 4);
  }

  TEST_CASE("submit-batch exits 3 when any job was rejected, and 2 for a bad file or batch" *
            doctest::timeout(60)) {
    DaemonProcess d{{"--min-budget-ms", "50"}};
    const std::string mixed = write_temp_file("mixed.json", R"([
      {"kind":"sleep","args":{"ms":1},"priority":"high","timeout_ms":3000},
      {"kind":"spin","args":{"ms":1},"timeout_ms":20}])");
    const CliResult r = cli(d.port(), {"submit-batch", mixed});
    CHECK(r.exit_code == 3);
    CHECK(r.out == "job 1: queued\njob 2: rejected (budget_too_small)\n");

    // The daemon's 400 names the item and its field; nothing of that batch is submitted.
    const std::string bad_item = write_temp_file(
        "bad_item.json", R"({"jobs":[{"kind":"sleep","args":{"ms":1}},{"kind":"spin","args":{"ms":"x"}}]})");
    const CliResult b = cli(d.port(), {"submit-batch", bad_item});
    CHECK(b.exit_code == 2);
    CHECK(b.err.find("jobs[1].args.ms: ") != std::string::npos);
    CHECK(b.out.empty());

    const CliResult not_json = cli(d.port(), {"submit-batch", write_temp_file("x.json", "{jobs")});
    CHECK(not_json.exit_code == 2);
    CHECK(not_json.err.find("sandglass: submit-batch: the batch is not valid JSON") == 0);
    const CliResult not_batch =
        cli(d.port(), {"submit-batch", write_temp_file("y.json", R"({"kind":"sleep"})")});
    CHECK(not_batch.exit_code == 2);
    CHECK(not_batch.err.find(R"(must be {"jobs": [...]} or an array of jobs)") != std::string::npos);
    const CliResult missing = cli(d.port(), {"submit-batch", "/nonexistent/batch.json"});
    CHECK(missing.exit_code == 2);
    CHECK(missing.err.find("/nonexistent/batch.json: cannot be read") != std::string::npos);
    CHECK(cli(d.port(), {"submit-batch"}).exit_code == 2);  // no file named
  }

  TEST_CASE("submit-batch exits 6 when the daemon cannot be reached" * doctest::timeout(60)) {
    const std::string url = "http://127.0.0.1:" + std::to_string(free_port());
    const std::string file = write_temp_file("one.json", R"([{"kind":"sleep"}])");
    const CliResult r = run_cli({"--url", url, "submit-batch", file});
    CHECK(r.exit_code == 6);
    CHECK(r.err.find("sandglass: cannot reach sandglassd at " + url + ": ") == 0);
  }
}
