// The cluster as an operator sees it (daemon/cluster/cluster_view.hpp), on real nodes sharing a
// real PostgreSQL: any node's GET /v1/jobs lists every node's jobs with the node that ran each,
// and its filters and cursor work; a job claimed ahead is listed "claimed", not "running";
// /v1/stats' "cluster" object names every node with its lease age and incarnation and says
// lost of a killed one once its lease lapsed; records.max_count bounds the finished rows.
#include "cluster/claimed_ahead_scene.hpp"
#include "cluster/cluster_fixture.hpp"

#include <doctest/doctest.h>

#include <signal.h>

#include <algorithm>
#include <set>

using namespace sandglass::testing;

namespace {

// GET `target` on `port` as JSON (it must answer 200).
boost::json::object get_json(std::uint16_t port, const std::string& target) {
  const HttpAnswer a = http(port, "GET", target);
  if (a.status != 200) throw std::runtime_error{"GET " + target + ": " + std::to_string(a.status) + " " + a.body};
  return json_of(a);
}

// The ids a listing's page names, in its order.
std::vector<std::uint64_t> ids_of(const boost::json::object& page) {
  std::vector<std::uint64_t> ids;
  for (const auto& j : page.at("jobs").as_array()) ids.push_back(j.at("id").to_number<std::uint64_t>());
  return ids;
}

std::vector<std::uint64_t> listed(std::uint16_t port, const std::string& query) {
  return ids_of(get_json(port, "/v1/jobs" + query));
}

// The listed job `id` of `page`; an empty object when it is not listed.
boost::json::object job_in(const boost::json::object& page, std::uint64_t id) {
  for (const auto& j : page.at("jobs").as_array()) {
    if (j.at("id").to_number<std::uint64_t>() == id) return j.as_object();
  }
  return {};
}

// The node named `name` in /v1/stats' cluster object on `port`; an empty object when absent.
boost::json::object node_in_stats(std::uint16_t port, const std::string& name) {
  const boost::json::object s = get_json(port, "/v1/stats");
  const auto* cluster = s.if_contains("cluster");
  if (cluster == nullptr || !cluster->is_object()) return {};
  for (const auto& n : cluster->as_object().at("nodes").as_array()) {
    if (text(n.as_object(), "name") == name) return n.as_object();
  }
  return {};
}

std::int64_t jobs_total(std::uint16_t port, const char* state) {
  const boost::json::object s = get_json(port, "/v1/stats");
  const auto* cluster = s.if_contains("cluster");
  if (cluster == nullptr) return -1;
  return cluster->as_object().at("jobs").at(state).at("total").to_number<std::int64_t>();
}

}  // namespace

TEST_SUITE("cluster view") {

TEST_CASE("any node lists every node's jobs with the node that ran each, and the filters and cursor work" *
          doctest::timeout(180)) {
  ClusterFixture c;
  DaemonProcess& sleeper = c.node({"sleep"});
  DaemonProcess& spinner = c.node({"spin"});
  const std::uint16_t p = spinner.port();
  std::set<std::uint64_t> sleeps, spins;
  const char* classes[] = {"critical", "high", "normal", "sheddable"};
  for (int i = 0; i < 8; ++i) {
    const std::string cls = classes[i % 4];
    const HttpAnswer a = post_job(p, fmt::format(R"({{"kind":"sleep","args":{{"ms":{}}},"priority":"{}","timeout_ms":{}}})",
                                                 2 + i, cls, 5'000 + 1'000 * i));
    REQUIRE(a.status == 200);
    sleeps.insert(id_of(a));
    const HttpAnswer b = post_job(p, fmt::format(R"({{"kind":"spin","args":{{"ms":{}}},"priority":"{}","timeout_ms":{}}})",
                                                 1 + i, cls, 3'000 + 500 * i));
    REQUIRE(b.status == 200);
    spins.insert(id_of(b));
  }
  // One cancelled while it runs on the sleeper.
  const std::uint64_t cancelled = submit_later(p, R"({"kind":"sleep","args":{"ms":60000},"priority":"high","timeout_ms":90000})");
  REQUIRE(eventually([&] { return state_of(p, cancelled) == "running"; }));
  REQUIRE(cancel_job(p, cancelled).at("state").as_string() == "cancelled");

  // Asked of the node that submitted them, which ran none of the sleeps.
  const boost::json::object all = get_json(p, "/v1/jobs?limit=1000");
  CHECK(ids_of(all).size() == sleeps.size() + spins.size() + 1);
  for (const std::uint64_t id : sleeps) {
    const auto j = job_in(all, id);
    CHECK(text(j, "node") == ClusterFixture::name_of(sleeper));
    CHECK(text(j, "state") == "completed");
    CHECK(text(j, "kind") == "sleep");
  }
  for (const std::uint64_t id : spins) CHECK(text(job_in(all, id), "node") == ClusterFixture::name_of(spinner));
  CHECK(text(job_in(all, cancelled), "node") == ClusterFixture::name_of(sleeper));
  // Newest first.
  const auto order = ids_of(all);
  CHECK(std::is_sorted(order.rbegin(), order.rend()));
  // The same listing on the other node.
  CHECK(ids_of(get_json(sleeper.port(), "/v1/jobs?limit=1000")) == order);

  const auto sleep_ids = listed(p, "?kind=sleep");
  CHECK(std::set<std::uint64_t>(sleep_ids.begin(), sleep_ids.end()) ==
        [&] { auto s = sleeps; s.insert(cancelled); return s; }());
  CHECK(listed(p, "?state=cancelled") == std::vector<std::uint64_t>{cancelled});
  CHECK(listed(p, "?cause=caller&kind=sleep") == std::vector<std::uint64_t>{cancelled});
  CHECK(listed(p, "?reason=ok&kind=spin").size() == spins.size());
  CHECK(listed(p, "?state=running").empty());
  CHECK(listed(p, "?state=queued").empty());
  CHECK(http(p, "GET", "/v1/jobs?state=sleeping").status == 400);

  // Pages of 5 through the cursor give the whole listing, in order.
  std::vector<std::uint64_t> paged;
  std::string cursor;
  for (int page = 0; page < 10; ++page) {
    const auto body = get_json(p, "/v1/jobs?limit=5" + (cursor.empty() ? "" : "&cursor=" + cursor));
    const auto ids = ids_of(body);
    paged.insert(paged.end(), ids.begin(), ids.end());
    if (body.at("next_cursor").is_null()) break;
    cursor = std::string{body.at("next_cursor").as_string()};
  }
  CHECK(paged == order);
}

TEST_CASE("a job its node claimed ahead is listed claimed, not running, and /v1/stats counts it so" *
          doctest::timeout(180)) {
  ClusterFixture c;
  DaemonProcess& entry = c.node({"spin"});
  DaemonProcess& runner = c.node({"sleep"}, 1, {}, "claim_ahead = 1");
  const std::uint16_t p = entry.port();
  // One runs on the runner's worker, one is claimed ahead, one stays queued.
  const auto [first, second, third] = three_long_sleeps(p);
  const std::uint64_t spin = id_of(post_job(p, R"({"kind":"spin","args":{"ms":2},"timeout_ms":3000})"));

  if (!eventually([&] { return listed(p, "?state=claimed") == std::vector<std::uint64_t>{second}; })) {
    MESSAGE(http(p, "GET", "/v1/jobs").body);
    MESSAGE(c.pg.scalar("SELECT string_agg(owner || ' ' || unstarted::text, '; ') FROM sandglass_nodes"));
    FAIL("the job claimed ahead is not listed claimed");
  }
  CHECK(listed(p, "?state=running") == std::vector<std::uint64_t>{first});
  CHECK(listed(p, "?state=queued") == std::vector<std::uint64_t>{third});
  const auto all = get_json(runner.port(), "/v1/jobs");
  CHECK(text(job_in(all, second), "state") == "claimed");
  CHECK(text(job_in(all, second), "node") == ClusterFixture::name_of(runner));
  CHECK(job_in(all, second).at("remaining_ms").to_number<std::int64_t>() > 0);
  CHECK(text(job_in(all, first), "state") == "running");
  CHECK(text(job_in(all, third), "state") == "queued");
  CHECK(text(job_in(all, spin), "state") == "completed");
  CHECK(state_of(p, second) == "claimed");  // GET of one job says what the listing says
  CHECK(state_of(p, first) == "running");
  CHECK(jobs_total(p, "claimed") == 1);
  CHECK(jobs_total(p, "running") == 1);
  CHECK(jobs_total(p, "queued") == 1);
  const auto stats = get_json(p, "/v1/stats");
  CHECK(stats.at("cluster").at("jobs").at("claimed").at("high").to_number<std::int64_t>() == 1);
  CHECK(stats.at("cluster").at("jobs").at("queued").at("normal").to_number<std::int64_t>() == 1);
  CHECK(node_in_stats(p, ClusterFixture::name_of(runner)).at("claimed_ahead").to_number<std::int64_t>() == 1);

  // Once the first ends, its worker takes the claimed one: listed running.
  CHECK(cancel_job(p, first).at("state").as_string() == "cancelled");
  REQUIRE(eventually([&] {
    const auto ids = listed(p, "?state=running");
    return std::find(ids.begin(), ids.end(), second) != ids.end();
  }));
  for (const std::uint64_t id : {second, third}) http(p, "DELETE", "/v1/jobs/" + std::to_string(id));
  REQUIRE(eventually([&] { return terminal(state_of(p, second)) && terminal(state_of(p, third)); }));
}

TEST_CASE("/v1/stats names every node with its lease age and incarnation, and a killed node is lost "
          "once its lease lapsed" * doctest::timeout(180)) {
  ClusterFixture c;
  DaemonProcess& a = c.node({"sleep"}, 3);
  DaemonProcess& b = c.node({"spin"}, 2);
  const std::string name_a = ClusterFixture::name_of(a), name_b = ClusterFixture::name_of(b);
  REQUIRE(post_job(a.port(), R"({"kind":"spin","args":{"ms":1},"timeout_ms":3000})").status == 200);

  const boost::json::object s = get_json(a.port(), "/v1/stats");
  const auto& cluster = s.at("cluster").as_object();
  CHECK(text(cluster, "node") == name_a);
  CHECK(text(cluster, "incarnation").starts_with(name_a + "/"));
  const boost::json::object na = node_in_stats(a.port(), name_a), nb = node_in_stats(a.port(), name_b);
  REQUIRE(!na.empty());
  REQUIRE(!nb.empty());
  CHECK(na.at("workers").to_number<int>() == 3);
  CHECK(nb.at("workers").to_number<int>() == 2);
  CHECK(text(nb, "incarnation").starts_with(name_b + "/"));
  for (const auto* n : {&na, &nb}) {
    CHECK(n->at("lease_age_ms").to_number<std::int64_t>() >= 0);
    CHECK(n->at("lease_ms").to_number<std::int64_t>() == kLeaseMs);
  }
  // Both beat (a snapshot on a loaded machine may catch a late beat; the next one is fresh).
  CHECK(eventually([&] {
    for (const std::string& name : {name_a, name_b}) {
      const auto n = node_in_stats(a.port(), name);
      if (n.empty() || n.at("lost").as_bool() || n.at("lease_age_ms").to_number<std::int64_t>() >= kLeaseMs) return false;
    }
    return true;
  }));
  CHECK(nb.at("kinds").as_array().size() == 1);
  // The node's own snapshot stays where it was.
  CHECK(s.contains("capacity"));
  CHECK(s.contains("last_minute"));

  b.signal(SIGKILL);
  REQUIRE(b.wait_exit(std::chrono::seconds{10}));
  REQUIRE(eventually([&] {
    const auto n = node_in_stats(a.port(), name_b);
    return !n.empty() && n.at("lost").as_bool() && n.at("lease_age_ms").to_number<std::int64_t>() >= kLeaseMs;
  }));
  CHECK(node_in_stats(a.port(), name_a).at("lost").as_bool() == false);
}

TEST_CASE("records.max_count bounds a cluster's finished rows: the oldest go, live and newest stay" *
          doctest::timeout(180)) {
  ClusterFixture c;
  const std::string records = "[records]\nmax_count = 6\n";
  // The [records] table after the [cluster] table the fixture writes.
  // Three workers: one runs the live 60 s job, and a finished job's worker is free for the
  // next, so admission never counts the live job as work ahead of a short one.
  DaemonProcess& a = c.node({"sleep"}, 3, {}, records);
  DaemonProcess& b = c.node({"spin"}, 2, {}, records);
  const std::uint64_t live = submit_later(a.port(), R"({"kind":"sleep","args":{"ms":60000},"priority":"sheddable","timeout_ms":90000})");
  std::vector<std::uint64_t> done;
  const char* classes[] = {"critical", "high", "normal", "sheddable"};
  for (int i = 0; i < 16; ++i) {
    const std::string body = i % 2 == 0
        ? fmt::format(R"({{"kind":"sleep","args":{{"ms":{}}},"priority":"{}","timeout_ms":{}}})", 1 + i, classes[i % 4], 4'000 + 100 * i)
        : fmt::format(R"({{"kind":"spin","args":{{"ms":{}}},"priority":"{}","timeout_ms":{}}})", 1 + i % 3, classes[i % 4], 2'000 + 100 * i);
    const HttpAnswer r = post_job(i % 3 == 0 ? a.port() : b.port(), body);
    REQUIRE(r.status == 200);
    done.push_back(id_of(r));
  }
  REQUIRE(eventually([&] { return c.pg.scalar("SELECT count(*) FROM sandglass_jobs WHERE state = 'done'") == "6"; }));
  // The six newest stay, on every node; the older ones are forgotten; the live job stays.
  const std::vector<std::uint64_t> newest(done.end() - 6, done.end());
  for (const std::uint64_t id : newest) {
    CHECK(http(a.port(), "GET", "/v1/jobs/" + std::to_string(id)).status == 200);
    CHECK(http(b.port(), "GET", "/v1/jobs/" + std::to_string(id)).status == 200);
  }
  for (auto it = done.begin(); it != done.end() - 6; ++it) {
    CHECK(http(b.port(), "GET", "/v1/jobs/" + std::to_string(*it)).status == 404);
  }
  CHECK(state_of(b.port(), live) == "running");
  const auto listing = listed(b.port(), "?limit=1000");
  std::vector<std::uint64_t> expected(newest.rbegin(), newest.rend());
  expected.push_back(live);
  CHECK(listing == expected);
  http(b.port(), "DELETE", "/v1/jobs/" + std::to_string(live));
}

}  // TEST_SUITE
