// GET /v1/jobs (the listing) and GET /v1/stats against the real sandglassd: filters, pages,
// the last minute's counts, and bad input answered 400 naming the parameter.
#include "config/config_test_support.hpp"
#include "daemon_test_support.hpp"

#include <doctest/doctest.h>

#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <functional>

#include <set>
#include <string>
#include <vector>

using namespace sandglass::testing;
using boost::json::array;
using boost::json::object;

namespace {

array jobs_of(std::uint16_t port, const std::string& query) {
  const HttpAnswer a = http(port, "GET", "/v1/jobs" + query);
  REQUIRE(a.status == 200);
  return json_of(a).at("jobs").as_array();
}

std::vector<std::uint64_t> ids_of(const array& jobs) {
  std::vector<std::uint64_t> ids;
  for (const auto& j : jobs) ids.push_back(j.at("id").to_number<std::uint64_t>());
  return ids;
}

object stats_of(std::uint16_t port) {
  const HttpAnswer a = http(port, "GET", "/v1/stats");
  REQUIRE(a.status == 200);
  return json_of(a);
}

std::int64_t at_path(const object& o, std::initializer_list<const char*> path) {
  const boost::json::value* v = &o.at(*path.begin());
  for (auto it = path.begin() + 1; it != path.end(); ++it) v = &v->at(*it);
  return v->to_number<std::int64_t>();
}

}  // namespace

TEST_SUITE("sandglassd listing and stats") {
  TEST_CASE("bad listing filters are answered 400 naming the parameter" * doctest::timeout(60)) {
    DaemonProcess d;
    struct Case {
      std::string query;
      std::string field;
    };
    const Case cases[] = {
        {"?state=done", "state"},         {"?state=", "state"},
        {"?limit=0", "limit"},            {"?limit=1001", "limit"},
        {"?limit=ten", "limit"},          {"?limit=-1", "limit"},
        {"?reason=nope", "reason"},       {"?cause=none", "cause"},
        {"?cause=me", "cause"},           {"?cursor=abc", "cursor"},
        {"?color=red", "color"},          {"?kind=%zz", "kind"},
        {"?kind=", "kind"},               {"?kind=a%2", "kind"},
        {"?state=queued&state=running", "state"},
        {"?=x", "query"},
    };
    for (const Case& c : cases) {
      CAPTURE(c.query);
      const HttpAnswer a = http(d.port(), "GET", "/v1/jobs" + c.query);
      CHECK(a.status == 400);
      const object body = json_of(a);
      CHECK(body.at("field").as_string() == c.field);
      CHECK(!body.at("error").as_string().empty());
    }
    CHECK(http(d.port(), "POST", "/v1/stats", "{}").status == 405);
    CHECK(http(d.port(), "DELETE", "/v1/jobs").status == 405);
    // A valid but empty listing.
    CHECK(jobs_of(d.port(), "?state=failed&limit=1000").empty());
  }

  TEST_CASE("the listing is newest first, filters by state kind reason and cause, and pages with its cursor" *
            doctest::timeout(60)) {
    DaemonProcess d{{"--workers", "2", "--min-budget-ms", "10"}};
    std::vector<std::uint64_t> done;
    for (int i = 0; i < 4; ++i) done.push_back(id_of(post_job(d.port(), R"({"kind":"sleep","args":{"ms":0}})")));
    for (int i = 0; i < 2; ++i) done.push_back(id_of(post_job(d.port(), R"({"kind":"spin","args":{"ms":1}})")));
    const HttpAnswer refused = post_job(d.port(), R"({"kind":"sleep","args":{"ms":0},"timeout_ms":5})");
    REQUIRE(refused.status == 504);
    const std::uint64_t refused_id = id_of(refused);
    // Says it is short (expected_ms), so that admission takes it and the jobs behind it.
    const std::uint64_t cancelled =
        id_of(post_job(d.port(), R"({"kind":"sleep","expected_ms":1,"args":{"ms":60000}})", {}, "?wait=false"));
    REQUIRE(eventually([&] { return state_of(d.port(), cancelled) == "running"; }));
    REQUIRE(cancel_job(d.port(), cancelled).at("state").as_string() == "cancelled");
    const std::uint64_t running = id_of(post_job(
        d.port(), R"({"kind":"sleep","args":{"ms":60000},"timeout_ms":120000})", {}, "?wait=false"));
    REQUIRE(eventually([&] { return state_of(d.port(), running) == "running"; }));

    const array all = jobs_of(d.port(), "");
    const std::vector<std::uint64_t> ids = ids_of(all);
    REQUIRE(ids.size() == 9);
    CHECK(std::is_sorted(ids.begin(), ids.end(), std::greater<>{}));
    CHECK(ids.front() == running);

    const array live = jobs_of(d.port(), "?state=running");
    REQUIRE(live.size() == 1);
    const object& r = live[0].as_object();
    CHECK(r.at("id").to_number<std::uint64_t>() == running);
    CHECK(r.at("state").as_string() == "running");
    CHECK(r.at("remaining_ms").to_number<std::int64_t>() > 60000);
    CHECK(r.at("remaining_ms").to_number<std::int64_t>() <= 120000);
    CHECK(r.at("timings").at("budget_ms").to_number<std::int64_t>() == 120000);
    CHECK(jobs_of(d.port(), "?state=queued").empty());

    CHECK(ids_of(jobs_of(d.port(), "?kind=spin")) == std::vector<std::uint64_t>{done[5], done[4]});
    CHECK(ids_of(jobs_of(d.port(), "?state=rejected&reason=budget_too_small")) ==
          std::vector<std::uint64_t>{refused_id});
    const array by_caller = jobs_of(d.port(), "?cause=caller");
    REQUIRE(by_caller.size() == 1);
    CHECK(by_caller[0].at("id").to_number<std::uint64_t>() == cancelled);
    CHECK(by_caller[0].at("reason").as_string() == "cancelled_while_running");
    CHECK(by_caller[0].as_object().if_contains("remaining_ms") == nullptr);  // terminal
    CHECK(jobs_of(d.port(), "?state=completed&kind=sleep").size() == 4);
    CHECK(jobs_of(d.port(), "?kind=s%6Ceep&state=completed").size() == 4);  // percent-decoded

    // Pages of 4: no overlap, no gap, and the last one has no cursor.
    std::vector<std::uint64_t> paged;
    std::string query = "?limit=4";
    int pages = 0;
    for (;;) {
      const HttpAnswer a = http(d.port(), "GET", "/v1/jobs" + query);
      REQUIRE(a.status == 200);
      const object page = json_of(a);
      for (const auto id : ids_of(page.at("jobs").as_array())) paged.push_back(id);
      ++pages;
      if (page.at("next_cursor").is_null()) break;
      REQUIRE(pages < 5);
      query = "?limit=4&cursor=" + std::string{page.at("next_cursor").as_string()};
    }
    CHECK(paged == ids);
    CHECK(pages == 3);
    // The record is the one GET /v1/jobs/{id} shows.
    const HttpAnswer one = http(d.port(), "GET", "/v1/jobs/" + std::to_string(done[0]));
    for (const auto& j : all) {
      if (j.at("id").to_number<std::uint64_t>() == done[0]) CHECK(boost::json::serialize(j) == one.body);
    }
  }

  TEST_CASE("stats count the last minute by state reason and cause, and show capacity, bulkheads and estimates" *
            doctest::timeout(60)) {
    ScopedTempFile config{"stats.toml", "[kinds.spin]\nlimit = 1\n"};
    DaemonProcess d{{"--config", config.path(), "--workers", "3", "--capacity", "64",
                     "--min-budget-ms", "10"}};
    for (int i = 0; i < 3; ++i) REQUIRE(post_job(d.port(), R"({"kind":"sleep","args":{"ms":2}})").status == 200);
    REQUIRE(post_job(d.port(), R"({"kind":"spin","args":{"ms":2}})").status == 200);
    REQUIRE(post_job(d.port(), R"({"kind":"sleep","args":{"ms":0},"timeout_ms":5})").status == 504);
    // Late: spin ignores nothing, but a sleep with commit_at_ms 0 runs on past its deadline.
    REQUIRE(post_job(d.port(), R"({"kind":"sleep","expected_ms":1,"args":{"ms":300,"commit_at_ms":0},"timeout_ms":100})")
                .status == 200);
    // Says it is short (expected_ms), so that admission takes it and the jobs behind it.
    const std::uint64_t cancelled =
        id_of(post_job(d.port(), R"({"kind":"sleep","expected_ms":1,"args":{"ms":60000}})", {}, "?wait=false"));
    REQUIRE(eventually([&] { return state_of(d.port(), cancelled) == "running"; }));
    REQUIRE(cancel_job(d.port(), cancelled).at("state").as_string() == "cancelled");
    const std::uint64_t running = id_of(
        post_job(d.port(), R"({"kind":"spin","args":{"ms":60000},"timeout_ms":120000})", {}, "?wait=false"));
    REQUIRE(eventually([&] { return state_of(d.port(), running) == "running"; }));

    const object s = stats_of(d.port());
    CHECK(at_path(s, {"capacity", "workers"}) == 3);
    CHECK(at_path(s, {"capacity", "queue"}) == 64);
    CHECK(at_path(s, {"queue", "depth"}) == 0);
    CHECK(s.at("queue").at("by_class").as_object().size() == 4);
    CHECK(at_path(s, {"running", "total"}) == 1);
    CHECK(at_path(s, {"running", "by_kind", "spin"}) == 1);
    CHECK(at_path(s, {"bulkheads", "spin", "limit"}) == 1);
    CHECK(at_path(s, {"bulkheads", "spin", "running"}) == 1);
    CHECK(at_path(s, {"submitted_total"}) == 8);
    const object& m = s.at("last_minute").as_object();
    CHECK(at_path(m, {"completed", "total"}) == 5);
    CHECK(at_path(m, {"completed", "late"}) == 1);
    CHECK(at_path(m, {"completed", "on_time"}) == 4);
    CHECK(at_path(m, {"completed", "by_reason", "ok"}) == 4);
    CHECK(at_path(m, {"completed", "by_reason", "completed_after_cancel"}) == 1);
    CHECK(at_path(m, {"refused", "total"}) == 1);
    CHECK(at_path(m, {"refused", "by_reason", "budget_too_small"}) == 1);
    CHECK(at_path(m, {"refused", "by_reason", "queue_full"}) == 0);
    CHECK(at_path(m, {"cancelled", "total"}) == 1);
    CHECK(at_path(m, {"cancelled", "by_cause", "caller"}) == 1);
    CHECK(at_path(m, {"cancelled", "by_cause", "deadline"}) == 0);
    CHECK(at_path(m, {"expired", "total"}) == 0);
    CHECK(m.at("goodput_per_s").to_number<double>() == doctest::Approx(4.0 / 60));
    // The chart's series: five minutes of seconds; their sums are the same outcomes.
    const object& series = s.at("series").as_object();
    std::int64_t on_time = 0, late = 0, refused = 0, cancelled_n = 0;
    for (const auto& v : series.at("on_time").as_array()) on_time += v.to_number<std::int64_t>();
    for (const auto& v : series.at("late").as_array()) late += v.to_number<std::int64_t>();
    for (const auto& v : series.at("refused").as_array()) refused += v.to_number<std::int64_t>();
    for (const auto& v : series.at("cancelled").as_array()) cancelled_n += v.to_number<std::int64_t>();
    CHECK(series.at("on_time").as_array().size() == 300);
    CHECK(on_time == 4);
    CHECK(late == 1);
    CHECK(refused == 1);
    CHECK(cancelled_n == 1);
    // Histograms: admitted jobs' budgets, started jobs' remaining at start and end.
    const object& h = s.at("histograms").as_object();
    const std::size_t buckets = h.at("le_ms").as_array().size() + 1;
    std::int64_t budgets = 0, at_start = 0, at_end = 0;
    REQUIRE(h.at("budget").as_array().size() == buckets);
    for (const auto& v : h.at("budget").as_array()) budgets += v.to_number<std::int64_t>();
    for (const auto& v : h.at("remaining_at_start").as_array()) at_start += v.to_number<std::int64_t>();
    for (const auto& v : h.at("remaining_at_end").as_array()) at_end += v.to_number<std::int64_t>();
    CHECK(budgets == 6);   // 4 completed + 1 late + 1 cancelled (the refused one never got one)
    CHECK(at_start == 6);
    CHECK(at_end == 5);    // the late one is counted apart
    CHECK(at_path(h, {"remaining_at_end_late"}) == 1);
    // The runtime's estimates per estimate key (the cancelled run says nothing about its kind).
    CHECK(at_path(s, {"estimates", "sleep", "samples"}) == 4);
    CHECK(at_path(s, {"estimates", "spin", "samples"}) == 1);
    CHECK(s.at("estimates").at("spin").at("kind").as_string() == "spin");
    CHECK(at_path(s, {"estimates", "sleep", "tail_ms"}) >= at_path(s, {"estimates", "sleep", "mean_ms"}));
    CHECK(s.at("breakers").is_object());
    CHECK(s.at("sql_pools").is_object());
    CHECK(cancel_job(d.port(), running).at("state").as_string() == "cancelled");
  }

  TEST_CASE("with a token configured the listing and stats need it and the page does not" *
            doctest::timeout(60)) {
    ScopedTempFile token{"token", "s3cr3t-token\n"};
    DaemonProcess d{{"--auth-token-file", token.path()}};
    CHECK(http(d.port(), "GET", "/v1/jobs").status == 401);
    CHECK(http(d.port(), "GET", "/v1/stats").status == 401);
    const std::vector<std::pair<std::string, std::string>> bearer{{"Authorization", "Bearer s3cr3t-token"}};
    CHECK(http(d.port(), "GET", "/v1/jobs", {}, bearer).status == 200);
    CHECK(http(d.port(), "GET", "/v1/stats", {}, bearer).status == 200);
    for (const char* path : {"/", "/ui", "/ui/app.js", "/ui/app.css"}) {
      CAPTURE(path);
      const HttpAnswer a = http(d.port(), "GET", path);
      CHECK(a.status == 200);
      CHECK(a.body.find("s3cr3t") == std::string::npos);
    }
  }

  TEST_CASE("the page's files carry a strict content security policy and no inline script or style" *
            doctest::timeout(60)) {
    DaemonProcess d;
    struct Case {
      const char* path;
      const char* type;
    };
    for (const Case c : {Case{"/", "text/html; charset=utf-8"}, Case{"/ui", "text/html; charset=utf-8"},
                         Case{"/ui/app.css", "text/css; charset=utf-8"},
                         Case{"/ui/app.js", "text/javascript; charset=utf-8"}}) {
      CAPTURE(c.path);
      const HttpAnswer a = http(d.port(), "GET", c.path);
      CHECK(a.status == 200);
      CHECK(a.header("content-type") == c.type);
      CHECK(a.header("content-security-policy").starts_with("default-src 'self';"));
      CHECK(a.header("x-content-type-options") == "nosniff");
      CHECK(a.header("referrer-policy") == "no-referrer");
    }
    const std::string html = http(d.port(), "GET", "/").body;
    CHECK(html.find("<script src=\"/ui/app.js\" defer></script>") != std::string::npos);
    CHECK(html.find("<script>") == std::string::npos);
    CHECK(html.find("<style") == std::string::npos);
    CHECK(html.find(" style=") == std::string::npos);
    CHECK(html.find(" onclick=") == std::string::npos);
    CHECK(html.find("http://") == std::string::npos);
    CHECK(html.find("https://") == std::string::npos);
    const std::string js = http(d.port(), "GET", "/ui/app.js").body;
    CHECK(js.find("innerHTML") == std::string::npos);
    CHECK(js.find("localStorage") == std::string::npos);
    CHECK(js.find("sessionStorage") == std::string::npos);
    CHECK(js.find("eval(") == std::string::npos);
    CHECK(http(d.port(), "POST", "/", "{}").status == 405);
  }
}
