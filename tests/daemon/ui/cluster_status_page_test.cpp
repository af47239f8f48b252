// The status page of a cluster node in a real headless Chromium, against real nodes sharing a
// real PostgreSQL: it shows the nodes table from /v1/stats' "cluster" (each node's name,
// incarnation, workers and lease; a killed node turns lost), the node that ran each job in the
// recent outcomes, and a job claimed ahead among the live jobs, named so.
//
// Skipped, with a message, only where no Chromium is installed (`make test` installs it).
#include "cluster/claimed_ahead_scene.hpp"
#include "cluster/cluster_fixture.hpp"
#include "ui/headless_chromium.hpp"

#include <doctest/doctest.h>

#include <boost/json/serialize.hpp>

#include <signal.h>

using namespace sandglass::testing;

namespace {

// A JavaScript string literal of `text` (JSON's escaping is JavaScript's).
std::string js(std::string_view text) { return boost::json::serialize(boost::json::string{text}); }

std::string text_at(HeadlessChromium& b, const std::string& selector) {
  const auto v = b.evaluate("(document.querySelector(" + js(selector) + ") || {}).textContent");
  return v.is_string() ? std::string{v.as_string()} : std::string{"<missing " + selector + ">"};
}

std::string node_row(const std::string& name) { return "#nodes tr[data-node=" + js(name) + "]"; }

}  // namespace

TEST_SUITE("status page in a browser") {
  TEST_CASE("a cluster node's page shows every node, the node of each job, and a job claimed ahead" *
            doctest::timeout(180)) {
    if (!find_chromium()) {
      MESSAGE("skipped: no chromium installed (Debian: apt-get install chromium; make test does)");
      return;
    }
    ClusterFixture c;
    DaemonProcess& entry = c.node({"spin"}, 2);
    DaemonProcess& runner = c.node({"sleep"}, 1, {}, "claim_ahead = 1");
    const std::string entry_name = ClusterFixture::name_of(entry), runner_name = ClusterFixture::name_of(runner);
    const std::uint16_t p = entry.port();
    const std::uint64_t done = id_of(post_job(p, R"({"kind":"sleep","args":{"ms":2},"priority":"high","timeout_ms":5000})"));
    const auto [first, ahead, queued] = three_long_sleeps(p);

    HeadlessChromium browser;
    browser.navigate("http://127.0.0.1:" + std::to_string(p) + "/");
    REQUIRE(browser.wait_for("document.querySelectorAll('#nodes tr').length === 2"));
    CHECK(!browser.evaluate("document.getElementById('cluster').hidden").as_bool());
    CHECK(text_at(browser, node_row(entry_name) + " td.workers") == "2");
    CHECK(text_at(browser, node_row(runner_name) + " td.workers") == "1");
    CHECK(text_at(browser, node_row(runner_name) + " td.incarnation").starts_with(runner_name + "/"));
    CHECK(std::stoll(text_at(browser, node_row(runner_name) + " td.lease-age")) >= 0);
    CHECK(text_at(browser, "#cluster-me") == "this node: " + entry_name);

    // The recent outcomes name the node that ran each job.
    const std::string done_row = "#recent tr[data-id=\"" + std::to_string(done) + "\"]";
    REQUIRE(browser.wait_for("document.querySelector(" + js(done_row) + ") !== null"));
    CHECK(text_at(browser, done_row + " td.node") == runner_name);
    CHECK(browser.evaluate("getComputedStyle(document.querySelector(" + js(done_row + " td.node") +
                           ")).display !== 'none'").as_bool());
    // The job claimed ahead is live, said claimed, on the runner.
    const std::string ahead_item = "#live li[data-id=\"" + std::to_string(ahead) + "\"]";
    REQUIRE(browser.wait_for("(document.querySelector(" + js(ahead_item) + ") || {dataset: {}}).dataset.state === 'claimed'"));
    CHECK(text_at(browser, ahead_item + " small") == "claimed on " + runner_name);
    CHECK(text_at(browser, "#live li[data-id=\"" + std::to_string(first) + "\"] small") == "running on " + runner_name);
    CHECK(text_at(browser, "#live li[data-id=\"" + std::to_string(queued) + "\"] small") == "queued");

    runner.signal(SIGKILL);
    REQUIRE(runner.wait_exit(std::chrono::seconds{10}));
    REQUIRE(browser.wait_for("(document.querySelector(" + js(node_row(runner_name)) + ") || {}).className === 'lost'"));
    CHECK(text_at(browser, node_row(runner_name) + " td.lease").starts_with("lost"));
    CHECK(text_at(browser, node_row(entry_name) + " td.lease").starts_with("held"));
    for (const std::string& line : browser.console()) {
      CAPTURE(line);
      CHECK(line.find("exception") == std::string::npos);
    }
  }
}
