// The status page in a real headless Chromium (Debian's `chromium`, driven over the DevTools
// protocol) against the real sandglassd running real jobs: its tiles match /v1/stats, a running
// job has its budget bar, its Cancel button cancels it (the list then says cancelled, cause
// caller), hostile text from clients shows as text, a token is asked for and kept out of URLs
// and storage, and an unreachable daemon is said so.
//
// Before the jobs it checks, the test puts a mixed load on the daemon for
// $SANDGLASS_STATUS_PAGE_LOAD_MS (default 2000; keep it under 50000, so that none of the
// load's outcomes leaves the last minute while the tiles are compared) with the page open, and
// takes a screenshot as the load ends: status-page.png in the test's working folder (the build folder's tests/), or
// $SANDGLASS_STATUS_PAGE_SCREENSHOT. The README's picture is this one, taken with a longer load.
//
// Skipped, with a message, only where no Chromium is installed (`make test` installs it).
#include "config/config_test_support.hpp"
#include "daemon_test_support.hpp"
#include "ui/headless_chromium.hpp"

#include <doctest/doctest.h>

#include <boost/json/serialize.hpp>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include <signal.h>

using namespace sandglass::testing;
using boost::json::object;

namespace {

constexpr std::string_view kHostile = "<img src=x onerror=alert(1)>";

std::int64_t env_ms(const char* name, std::int64_t fallback) {
  const char* v = std::getenv(name);
  return v == nullptr ? fallback : std::stoll(v);
}

// A JavaScript string literal of `text` (JSON's escaping is JavaScript's).
std::string js(std::string_view text) { return boost::json::serialize(boost::json::string{text}); }

std::string text_of(HeadlessChromium& b, const std::string& selector) {
  const auto v = b.evaluate("(document.querySelector(" + js(selector) + ") || {}).textContent");
  return v.is_string() ? std::string{v.as_string()} : std::string{"<missing " + selector + ">"};
}

// A mixed load from `threads` clients until stopped: short jobs of several kinds, classes and
// budgets, some too small to admit, some too long for their budget, some cancelled.
class Load {
 public:
  Load(std::uint16_t port, int threads) {
    for (int t = 0; t < threads; ++t) {
      threads_.emplace_back([port, t](std::stop_token stop) {
        for (int i = t; !stop.stop_requested(); i += 7) {
          std::string body;
          // Now and then a job that goes on past its deadline (after its commit point a
          // cancellation no longer stops it): the page shows it red.
          if (i % 1050 == 0) {
            // Says it is short (expected_ms), so that admission takes it and the jobs behind it.
            post_job(port, R"({"kind":"sleep","expected_ms":1,"args":{"ms":2500,"commit_at_ms":0},"timeout_ms":900})", {}, "?wait=false");
          }
          switch (i % 10) {
            case 0: body = R"({"kind":"sleep","args":{"ms":1},"timeout_ms":4})"; break;  // too small
            case 1: case 2: case 3:
              body = R"({"kind":"sleep","args":{"ms":20},"timeout_ms":400})"; break;
            case 4: body = R"({"kind":"spin","args":{"ms":15},"timeout_ms":300,"priority":"high"})"; break;
            case 5: body = R"({"kind":"sleep","args":{"ms":80},"timeout_ms":120,"priority":"sheddable"})"; break;
            case 6: body = R"({"kind":"spin","args":{"ms":200},"timeout_ms":60})"; break;  // runs out
            case 7: body = R"({"kind":"sleep","args":{"ms":5},"timeout_ms":1000,"priority":"critical"})"; break;
            default: body = R"({"kind":"sleep","args":{"ms":40},"timeout_ms":150})"; break;
          }
          const HttpAnswer a = post_job(port, body, {}, "?wait=false");
          if (i % 13 == 0 && a.status == 202) http(port, "DELETE", "/v1/jobs/" + std::to_string(id_of(a)));
          std::this_thread::sleep_for(std::chrono::milliseconds{8});  // a paced client, not an order
        }
      });
    }
  }

 private:
  std::vector<std::jthread> threads_;
};

bool nothing_live_but(std::uint16_t port, std::uint64_t id) {
  const HttpAnswer a = http(port, "GET", "/v1/jobs?state=queued");
  const HttpAnswer b = http(port, "GET", "/v1/jobs?state=running");
  if (a.status != 200 || b.status != 200) return false;
  const object queued = json_of(a);
  const object live = json_of(b);
  const auto& running = live.at("jobs").as_array();
  return queued.at("jobs").as_array().empty() && running.size() == 1 &&
         running[0].at("id").to_number<std::uint64_t>() == id;
}

}  // namespace

TEST_SUITE("status page in a browser") {
  TEST_CASE("the page shows the daemon's figures, a live job's bar, cancels it, and shows hostile text as text" *
            doctest::timeout(180)) {
    if (!find_chromium()) {
      MESSAGE("skipped: no chromium installed (Debian: apt-get install chromium; make test does)");
      return;
    }
    // An exec command named with markup: its failure's error text carries that name.
    ScopedTempFile config{"page.toml", "[commands.\"" + std::string{kHostile} + "\"]\nargv = [\"/bin/false\"]\n"};
    DaemonProcess d{{"--config", config.path(), "--workers", "3", "--capacity", "32", "--min-budget-ms", "10"}};
    const std::uint16_t port = d.port();

    // The long job first, so that it runs through the load.
    const std::uint64_t long_job = id_of(
        post_job(port, R"({"kind":"sleep","args":{"ms":250000},"timeout_ms":280000})", {}, "?wait=false"));
    REQUIRE(eventually([&] { return state_of(port, long_job) == "running"; }));
    HeadlessChromium browser;
    const std::string page = "http://127.0.0.1:" + std::to_string(port) + "/";
    {
      // The page during the load; the screenshot shows it as the load ends.
      Load load{port, 3};
      browser.navigate(page);
      REQUIRE(browser.wait_for("Number(document.body.dataset.polls || 0) >= 1"));
      std::this_thread::sleep_for(std::chrono::milliseconds{env_ms("SANDGLASS_STATUS_PAGE_LOAD_MS", 2000)});
      const char* shot = std::getenv("SANDGLASS_STATUS_PAGE_SCREENSHOT");
      const std::string path =
          shot != nullptr ? shot : (std::filesystem::current_path() / "status-page.png").string();
      browser.screenshot(path);
      CHECK(std::filesystem::file_size(path) > 10'000);
      MESSAGE("screenshot: " << path);
    }
    if (!eventually([&] { return nothing_live_but(port, long_job); }, std::chrono::seconds{30})) {
      MESSAGE(http(port, "GET", "/v1/jobs?state=queued").body);
      MESSAGE(http(port, "GET", "/v1/jobs?state=running").body);
      MESSAGE(http(port, "GET", "/v1/jobs/" + std::to_string(long_job)).body);
      FAIL("jobs of the load are still live");
    }

    for (int i = 0; i < 3; ++i) REQUIRE(post_job(port, R"({"kind":"sleep","args":{"ms":1}})").status == 200);
    const HttpAnswer refused = post_job(port, R"({"kind":"sleep","args":{"ms":1},"timeout_ms":5})");
    REQUIRE(refused.status == 504);
    // Says it is short (expected_ms), so that admission takes it and the jobs behind it.
    const std::uint64_t cancelled = id_of(post_job(port, R"({"kind":"sleep","expected_ms":1,"args":{"ms":60000}})", {}, "?wait=false"));
    REQUIRE(cancel_job(port, cancelled).at("state").as_string() == "cancelled");
    const HttpAnswer hostile =
        post_job(port, R"({"kind":"exec","args":{"command":")" + std::string{kHostile} + R"("}})");
    REQUIRE(hostile.status == 500);
    const std::uint64_t hostile_id = id_of(hostile);
    REQUIRE(json_of(hostile).at("error").as_string().find(kHostile) != std::string::npos);

    SUBCASE("the tiles match /v1/stats, the running job has its bar, hostile text is text, Cancel cancels") {
      // Nothing ends now but what the test ends: stats read before and after the page's next two
      // polls are the page's figures.
      const object before = json_of(http(port, "GET", "/v1/stats"));
      const auto polls = browser.evaluate("Number(document.body.dataset.polls)").to_number<std::int64_t>();
      REQUIRE(browser.wait_for("Number(document.body.dataset.polls) >= " + std::to_string(polls + 2)));
      const std::string throughput = text_of(browser, "#tile-throughput");
      const std::string goodput = text_of(browser, "#tile-goodput");
      const std::string refused_tile = text_of(browser, "#tile-refused");
      const std::string queue = text_of(browser, "#tile-queue");
      const std::string running = text_of(browser, "#tile-running");
      const std::string too_small = text_of(browser, "#tile-refused-reasons li[data-reason=budget_too_small] b");
      // The kinds table: a row per kind and per estimate key, with the runtime's estimates.
      const std::string sleep_row = "#kinds tr[data-row=\"sleep\"]";
      const std::string hostile_key = "exec:" + std::string{kHostile};
      const std::string key_row = "#kinds tr[data-row=" + js(hostile_key) + "]";
      const std::string sleep_mean = text_of(browser, sleep_row + " td:nth-child(4)");
      const std::string sleep_tail = text_of(browser, sleep_row + " td:nth-child(5)");
      const std::string sleep_samples = text_of(browser, sleep_row + " td:nth-child(6)");
      const std::string key_name = text_of(browser, key_row + " td:nth-child(1)");
      const std::string key_running = text_of(browser, key_row + " td:nth-child(2)");
      const std::string key_samples = text_of(browser, key_row + " td:nth-child(6)");
      const object after = json_of(http(port, "GET", "/v1/stats"));
      const object& m = after.at("last_minute").as_object();
      REQUIRE(boost::json::serialize(before.at("last_minute")) == boost::json::serialize(m));
      CHECK(throughput == std::to_string(m.at("completed").at("total").to_number<std::int64_t>()));
      CHECK(goodput == std::to_string(m.at("completed").at("on_time").to_number<std::int64_t>()));
      CHECK(refused_tile == std::to_string(m.at("refused").at("total").to_number<std::int64_t>()));
      CHECK(too_small ==
            std::to_string(m.at("refused").at("by_reason").at("budget_too_small").to_number<std::int64_t>()));
      CHECK(m.at("refused").at("by_reason").at("budget_too_small").to_number<std::int64_t>() >= 1);
      CHECK(m.at("completed").at("total").to_number<std::int64_t>() >= 3);
      CHECK(queue == std::to_string(after.at("queue").at("depth").to_number<std::int64_t>()) + " / 32");
      CHECK(running == "1 / 3");
      REQUIRE(boost::json::serialize(before.at("estimates")) == boost::json::serialize(after.at("estimates")));
      const object& sleep_estimate = after.at("estimates").at("sleep").as_object();
      CHECK(sleep_mean == std::to_string(sleep_estimate.at("mean_ms").to_number<std::int64_t>()));
      CHECK(sleep_tail == std::to_string(sleep_estimate.at("tail_ms").to_number<std::int64_t>()));
      CHECK(sleep_samples == std::to_string(sleep_estimate.at("samples").to_number<std::int64_t>()));
      CHECK(key_name == hostile_key);  // as text
      CHECK(key_running.empty());      // running jobs go by kind, on the exec row
      CHECK(key_samples == "1");       // the failed run
      CHECK(after.at("estimates").at(hostile_key).at("kind").as_string() == "exec");

      // The running job's bar: queued, running and left segments.
      const std::string row = "#live li[data-id=\"" + std::to_string(long_job) + "\"]";
      REQUIRE(browser.wait_for("document.querySelector(" + js(row + "[data-state=running] .bar .run") + ")"));
      CHECK(browser.evaluate("document.querySelectorAll(" + js(row + " .bar > span") + ").length")
                .to_number<int>() == 3);
      CHECK(text_of(browser, row + " .kind") == "sleep");

      // The hostile error text is shown as text, in the list and in the job's detail.
      const std::string hostile_row = "#recent tr[data-id=\"" + std::to_string(hostile_id) + "\"]";
      REQUIRE(browser.wait_for("document.querySelector(" + js(hostile_row) + ")"));
      CHECK(text_of(browser, hostile_row + " td.err").find(kHostile) != std::string::npos);
      CHECK(text_of(browser, hostile_row + " td.state") == "failed");
      browser.evaluate("document.querySelector(" + js(hostile_row) + ").click()");
      REQUIRE(browser.wait_for("!document.getElementById('detail').hidden"));
      CHECK(text_of(browser, "#detail-fields dd[data-field=error]").find(kHostile) != std::string::npos);
      CHECK(browser.evaluate("document.images.length").to_number<int>() == 0);
      // The cancelled job says who cancelled it.
      const std::string cancelled_row = "#recent tr[data-id=\"" + std::to_string(cancelled) + "\"]";
      CHECK(text_of(browser, cancelled_row + " td.state") == "cancelled");
      CHECK(text_of(browser, cancelled_row + " td.cause") == "caller");

      browser.evaluate("document.getElementById('detail-close').click()");

      // Cancel, as an operator would.
      browser.evaluate("document.querySelector(" + js(row + " button.cancel") + ").click()");
      const std::string long_row = "#recent tr[data-id=\"" + std::to_string(long_job) + "\"]";
      REQUIRE(browser.wait_for("document.querySelector(" + js(long_row + "[data-state=cancelled]") + ")"));
      CHECK(text_of(browser, long_row + " td.cause") == "caller");
      CHECK(text_of(browser, long_row + " td.reason") == "cancelled_while_running");
      const object record = json_of(http(port, "GET", "/v1/jobs/" + std::to_string(long_job)));
      CHECK(record.at("state").as_string() == "cancelled");
      CHECK(record.at("cause").as_string() == "caller");
      REQUIRE(browser.wait_for("!document.querySelector(" + js(row) + ")"));
      CHECK(!browser.evaluate("document.getElementById('live-empty').hidden").as_bool());

      // The text filter narrows the list to what contains it.
      browser.evaluate("const f = document.getElementById('filter-text'); f.value = 'onerror';"
                       "f.dispatchEvent(new Event('input'))");
      CHECK(browser.evaluate("document.querySelectorAll('#recent tr').length").to_number<int>() == 1);

      for (const std::string& line : browser.console()) {
        CAPTURE(line);
        CHECK(line.find("dialog") == std::string::npos);
        CHECK(line.find("exception") == std::string::npos);
      }
    }

    SUBCASE("an unreachable daemon is said so") {
      d.signal(SIGKILL);
      REQUIRE(browser.wait_for("!document.getElementById('banner').hidden"));
      CHECK(text_of(browser, "#banner").find("Cannot reach sandglassd") != std::string::npos);
      CHECK(text_of(browser, "#conn") == "unreachable");
    }
  }

  TEST_CASE("with a token configured the page asks for it and keeps it out of URLs and storage" *
            doctest::timeout(120)) {
    if (!find_chromium()) {
      MESSAGE("skipped: no chromium installed (Debian: apt-get install chromium; make test does)");
      return;
    }
    ScopedTempFile token{"token", "page-t0ken\n"};
    DaemonProcess d{{"--auth-token-file", token.path()}};
    const std::vector<std::pair<std::string, std::string>> bearer{{"Authorization", "Bearer page-t0ken"}};
    REQUIRE(http(d.port(), "POST", "/v1/jobs", R"({"kind":"sleep","args":{"ms":1}})", bearer).status == 200);

    HeadlessChromium browser;
    browser.navigate("http://127.0.0.1:" + std::to_string(d.port()) + "/ui");
    REQUIRE(browser.wait_for("!document.getElementById('token-form').hidden"));
    CHECK(text_of(browser, "#banner").find("bearer token") != std::string::npos);
    browser.evaluate("document.getElementById('token').value = 'wrong';"
                     "document.getElementById('token-form').requestSubmit()");
    REQUIRE(browser.wait_for("document.getElementById('banner').textContent.includes('did not accept')"));
    browser.evaluate("document.getElementById('token').value = 'page-t0ken';"
                     "document.getElementById('token-form').requestSubmit()");
    REQUIRE(browser.wait_for("Number(document.body.dataset.polls || 0) >= 1"));
    CHECK(browser.evaluate("document.getElementById('token-form').hidden").as_bool());
    CHECK(text_of(browser, "#tile-throughput") == "1");
    CHECK(browser.evaluate("location.href.includes('t0ken')").as_bool() == false);
    CHECK(browser.evaluate("localStorage.length + sessionStorage.length").to_number<int>() == 0);
    CHECK(browser.evaluate("document.cookie").as_string() == "");
    CHECK(browser.evaluate("document.body.textContent.includes('t0ken')").as_bool() == false);
  }
}
