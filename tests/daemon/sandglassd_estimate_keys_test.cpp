// Estimate keys in the daemon: each exec command has its own estimate, so a few slow commands
// do not make a fast one implausible (503 deadline_implausible) on an idle daemon, and the 503
// says what was estimated.
#include "daemon_test_support.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace sandglass::testing;
using boost::json::object;

TEST_SUITE("sandglassd estimate keys") {
  TEST_CASE("a slow command's estimate does not make a fast command's job implausible" *
            doctest::timeout(60)) {
    const std::string config = write_temp_file(
        "estimate_keys.toml",
        "[commands.slow]\nargv = [\"/bin/sleep\", \"0.6\"]\n"
        "[commands.fast]\nargv = [\"/bin/true\"]\n");
    DaemonProcess d{{"--config", config}};
    for (int i = 0; i < 2; ++i) {
      const HttpAnswer slow = post_job(d.port(), R"({"kind":"exec","args":{"command":"slow"}})");
      REQUIRE(slow.status == 200);
    }
    // A job of another kind beside them keeps its own (kind) estimate.
    REQUIRE(post_job(d.port(), R"({"kind":"sleep","args":{"ms":1}})").status == 200);

    // 300 ms is plenty for /bin/true; with one estimate for all commands the slow command's
    // 600 ms made it 503 deadline_implausible.
    const HttpAnswer fast = post_job(d.port(), R"({"kind":"exec","args":{"command":"fast"}})",
                                     {{"x-request-timeout-ms", "300"}});
    CHECK(fast.status == 200);
    CHECK(json_of(fast).at("state").as_string() == "completed");

    // The slow command still is implausible in 300 ms, and the 503 says what was predicted.
    const HttpAnswer slow = post_job(d.port(), R"({"kind":"exec","args":{"command":"slow"}})",
                                     {{"x-request-timeout-ms", "300"}});
    CHECK(slow.status == 503);
    const object r = json_of(slow);
    CHECK(r.at("reason").as_string() == "deadline_implausible");
    const std::string error{r.at("error").as_string()};
    CHECK(error.find("predicted finish ") == 0);
    CHECK(error.find(" for exec:slow) > deadline in ") != std::string::npos);

    // /metrics exports each key's estimate.
    CHECK(metric(d.port(), R"(sandglass_estimate_samples{key="exec:slow",kind="exec"})") == 2);
    CHECK(metric(d.port(), R"(sandglass_estimate_samples{key="exec:fast",kind="exec"})") == 1);
    CHECK(metric(d.port(), R"(sandglass_estimate_samples{key="sleep",kind="sleep"})") == 1);
    CHECK(metric(d.port(), R"(sandglass_estimate_seconds{key="exec:slow",kind="exec",stat="tail"})") >= 0.6);
    CHECK(metric(d.port(), R"(sandglass_estimate_seconds{key="exec:slow",kind="exec",stat="mean"})") >= 0.6);

    // /v1/stats (the status page) shows the same figures per key: the runtime's, not its own.
    const HttpAnswer stats = http(d.port(), "GET", "/v1/stats");
    REQUIRE(stats.status == 200);
    const object body = json_of(stats);
    const object& e = body.at("estimates").as_object();
    CHECK(e.size() == 3);
    CHECK(e.at("exec:slow").at("kind").as_string() == "exec");
    CHECK(e.at("exec:slow").at("samples").to_number<std::int64_t>() == 2);
    CHECK(e.at("exec:slow").at("mean_ms").to_number<std::int64_t>() >= 600);
    CHECK(e.at("exec:slow").at("tail_ms").to_number<std::int64_t>() >= 600);
    CHECK(e.at("exec:fast").at("kind").as_string() == "exec");
    CHECK(e.at("exec:fast").at("samples").to_number<std::int64_t>() == 1);
    CHECK(e.at("sleep").at("kind").as_string() == "sleep");
    CHECK(e.at("sleep").at("samples").to_number<std::int64_t>() == 1);
  }
}
