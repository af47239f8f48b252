// Claiming ahead (daemon/cluster/claimer.cpp): while the cluster's queue has a backlog, a node
// holds a few claimed jobs beyond its free workers in its local Runtime's queue, so that a
// worker that ends a job never waits for a claim's round trip. Such a job is a running row of
// its node that has not started: a cancel from another node, a kill -9 of its node and a
// shutdown must each still give it exactly one outcome.
#include "cluster/cluster_fixture.hpp"

#include <doctest/doctest.h>

#include <signal.h>

#include <thread>

using namespace sandglass::testing;
using namespace std::chrono_literals;

namespace {

std::string running_on(ClusterFixture& c, const DaemonProcess& node) {
  return c.pg.scalar("SELECT count(*) FROM sandglass_jobs WHERE state = 'running' AND node_ran = '" +
                     ClusterFixture::name_of(node) + "'");
}

// The jobs of the scene below, by role.
struct Scene {
  std::uint64_t short_critical = 0, short_high = 0;  // run first, then free the two workers
  std::uint64_t long_committed = 0, long_high = 0;   // then run on the runner's two workers
                                                     // (the first commits when asked to)
  std::uint64_t ahead = 0;                           // claimed ahead: in the runner's local queue
  std::uint64_t queued = 0;                          // left in the database's queue
  std::vector<std::uint64_t> spins;                  // run on the entry node meanwhile
  std::vector<std::uint64_t> all() const {
    std::vector<std::uint64_t> v{short_critical, short_high, long_committed, long_high, ahead, queued};
    v.insert(v.end(), spins.begin(), spins.end());
    return v;
  }
};

// On a runner of two workers (one place ahead): two short jobs run, and as each ends its worker
// takes the next job while the claimer claims one more; once both have ended, the runner holds
// three jobs (the two long ones it runs and one ahead) and one more stays queued. Kinds, classes
// and budgets are mixed; the claim order (class, then deadline) and the local queue's (the same)
// decide which job waits.
// `commit`: the first long job passes a commit point 20 ms into its run; `ahead_budget_ms`: the
// budget of the job that waits.
Scene hold_one_ahead(ClusterFixture& c, const DaemonProcess& entry, const DaemonProcess& runner,
                     int long_ms, bool commit, int ahead_budget_ms = 50'000) {
  Scene s;
  const std::uint16_t p = entry.port();
  s.short_critical = submit_later(p, R"({"kind":"sleep","args":{"ms":300},"priority":"critical","timeout_ms":20000})");
  s.short_high = submit_later(p, R"({"kind":"sleep","args":{"ms":400},"priority":"high","timeout_ms":20000})");
  // The long ones say they are short (expected_ms), so that admission takes them and the jobs
  // behind them, however long they really run.
  s.long_committed = submit_later(p, fmt::format(R"({{"kind":"sleep","expected_ms":1,"args":{{"ms":{}{}}},"priority":"high","timeout_ms":60000}})", long_ms,
                                                   commit ? R"(,"commit_at_ms":20)" : ""));
  s.long_high = submit_later(p, fmt::format(R"({{"kind":"sleep","expected_ms":1,"args":{{"ms":{}}},"priority":"high","timeout_ms":61000}})", long_ms));
  s.ahead = submit_later(p, fmt::format(R"({{"kind":"sleep","expected_ms":1,"args":{{"ms":{}}},"priority":"normal","timeout_ms":{}}})",
                                         long_ms, ahead_budget_ms));
  s.queued = submit_later(p, fmt::format(R"({{"kind":"sleep","expected_ms":1,"args":{{"ms":{}}},"priority":"sheddable","timeout_ms":40000}})", long_ms));
  for (int i = 0; i < 4; ++i) {
    s.spins.push_back(submit_later(p, fmt::format(R"({{"kind":"spin","args":{{"ms":{}}},"priority":"{}","timeout_ms":{}}})",
                                                  5 + 10 * i, i % 2 == 0 ? "normal" : "critical", 5'000 + 2'000 * i)));
  }
  // More claimed jobs than workers: without claiming ahead, never more than two.
  REQUIRE(eventually([&] {
    return state_of(p, s.short_critical) == "completed" && state_of(p, s.short_high) == "completed" &&
           metric(runner.port(), "sandglass_cluster_held_jobs") == 3 && running_on(c, runner) == "3";
  }));
  // The one that waits is the last in claim order of the three the runner holds.
  CHECK(c.pg.scalar("SELECT id FROM sandglass_jobs WHERE state = 'running' ORDER BY priority DESC, "
                    "deadline DESC LIMIT 1") == std::to_string(s.ahead));
  CHECK(state_of(p, s.queued) == "queued");
  return s;
}

// Each job of `s` has exactly one outcome, written once.
void one_outcome_each(ClusterFixture& c, const Scene& s) {
  for (const std::uint64_t id : s.all()) {
    CHECK(c.pg.scalar("SELECT count(*) FROM outcome_log WHERE id = " + std::to_string(id)) == "1");
  }
  CHECK(c.pg.scalar("SELECT count(*) FROM outcome_log") == std::to_string(s.all().size()));
}

// The runner fills its place ahead with the queued job; then the rest are cancelled (that one
// first: each cancel of a running job frees a worker) and every job of `s` ends.
void takes_queued_then_cancel_rest(const DaemonProcess& entry, const DaemonProcess& runner,
                                   const Scene& s) {
  // Claimed into the place ahead behind two long runs, it never starts: listed running until
  // the runner's next beat notes it unstarted, then claimed.
  REQUIRE(eventually([&] { return text(record(entry.port(), s.queued), "state") == "claimed"; }));
  CHECK(text(record(entry.port(), s.queued), "node") == ClusterFixture::name_of(runner));
  for (const std::uint64_t id : {s.queued, s.long_committed, s.long_high}) {
    CHECK(http(entry.port(), "DELETE", "/v1/jobs/" + std::to_string(id)).status == 200);
  }
  for (const std::uint64_t id : s.all()) {
    REQUIRE(eventually([&] { return terminal(state_of(entry.port(), id)); }));
  }
}

}  // namespace

TEST_SUITE("cluster") {

TEST_CASE("a node with a backlog holds claimed jobs beyond its workers, and a DELETE on another "
          "node cancels one still in its local queue" * doctest::timeout(180)) {
  ClusterFixture c;
  DaemonProcess& entry = c.node({"spin"});
  DaemonProcess& runner = c.node({"sleep"}, 2);
  c.log_outcomes();
  const Scene s = hold_one_ahead(c, entry, runner, 30'000, /*commit=*/false);

  const HttpAnswer del = http(entry.port(), "DELETE", "/v1/jobs/" + std::to_string(s.ahead));
  CHECK(del.status == 200);
  REQUIRE(eventually([&] { return state_of(entry.port(), s.ahead) == "cancelled"; }));
  const auto o = record(entry.port(), s.ahead);
  CHECK(text(o, "reason") == "cancelled_in_queue");  // it never started
  CHECK(text(o, "cause") == "caller");
  CHECK(text(o, "node") == ClusterFixture::name_of(runner));  // it was claimed there
  CHECK(o.at("attempt").as_int64() == 1);
  CHECK(state_of(entry.port(), s.long_committed) == "running");
  CHECK(state_of(entry.port(), s.long_high) == "running");

  takes_queued_then_cancel_rest(entry, runner, s);
  CHECK(text(record(entry.port(), s.queued), "reason") == "cancelled_in_queue");
  CHECK(text(record(entry.port(), s.long_high), "reason") == "cancelled_while_running");
  for (const std::uint64_t id : s.spins) CHECK(state_of(entry.port(), id) == "completed");
  one_outcome_each(c, s);
}

TEST_CASE("a job claimed ahead whose deadline passes in the local queue ends expired_in_queue "
          "there, never started, and the node claims the next one" * doctest::timeout(180)) {
  ClusterFixture c;
  DaemonProcess& entry = c.node({"spin"});
  DaemonProcess& runner = c.node({"sleep"}, 2);
  c.log_outcomes();
  const Scene s = hold_one_ahead(c, entry, runner, 30'000, /*commit=*/false, /*ahead_budget_ms=*/4'000);
  REQUIRE(eventually([&] { return terminal(state_of(entry.port(), s.ahead)); }, 30s));
  const auto o = record(entry.port(), s.ahead);
  CHECK(text(o, "state") == "expired");
  CHECK(text(o, "reason") == "expired_in_queue");
  CHECK(text(o, "node") == ClusterFixture::name_of(runner));
  CHECK(o.at("attempt").as_int64() == 1);
  // Never started: no run time, and by the database's clock it was claimed before its deadline.
  CHECK(c.pg.scalar("SELECT run_us < 0 AND claimed_at < deadline FROM sandglass_jobs WHERE id = " +
                    std::to_string(s.ahead)) == "t");
  // Its place ahead goes to the queued job.
  takes_queued_then_cancel_rest(entry, runner, s);
  one_outcome_each(c, s);
}

TEST_CASE("kill -9 of a node holding a job claimed ahead: that job is claimed again elsewhere "
          "like its running ones, and one past its commit point ends node_lost" *
          doctest::timeout(180)) {
  ClusterFixture c;
  DaemonProcess& entry = c.node({"spin"});
  DaemonProcess& runner = c.node({"sleep"}, 2);
  c.log_outcomes();
  const Scene s = hold_one_ahead(c, entry, runner, 5'000, /*commit=*/true);
  REQUIRE(eventually([&] { return record(entry.port(), s.long_committed).at("committed").as_bool(); }));
  const std::string lost = ClusterFixture::name_of(runner);
  runner.signal(SIGKILL);
  REQUIRE(runner.wait_exit(10s).has_value());
  DaemonProcess& heir = c.node({"sleep"}, 4);

  for (const std::uint64_t id : s.all()) {
    REQUIRE(eventually([&] { return terminal(state_of(entry.port(), id)); }, 60s));
  }
  const auto committed = record(entry.port(), s.long_committed);
  CHECK(text(committed, "reason") == "node_lost");
  CHECK(committed.at("attempt").as_int64() == 1);
  for (const std::uint64_t id : {s.long_high, s.ahead}) {
    const auto o = record(entry.port(), id);
    CHECK(text(o, "state") == "completed");
    CHECK(o.at("attempt").as_int64() == 2);  // its first claim was the lost node's
    CHECK(text(o, "node") == ClusterFixture::name_of(heir));
  }
  const auto queued = record(entry.port(), s.queued);
  CHECK(text(queued, "state") == "completed");
  CHECK(queued.at("attempt").as_int64() == 1);  // never claimed by the lost node
  CHECK(text(queued, "node") == ClusterFixture::name_of(heir));
  for (const std::uint64_t id : {s.short_critical, s.short_high}) {
    CHECK(text(record(entry.port(), id), "node") == lost);
  }
  for (const std::uint64_t id : s.spins) CHECK(state_of(entry.port(), id) == "completed");
  one_outcome_each(c, s);
}

TEST_CASE("SIGTERM of a node holding a job claimed ahead: the drain runs it when a worker frees "
          "up in time, else the drain deadline gives it back to the queue for another node" *
          doctest::timeout(180)) {
  bool in_time = true;
  SUBCASE("a worker frees up before the drain deadline") {}
  SUBCASE("the drain deadline comes first") { in_time = false; }
  ClusterFixture c;
  DaemonProcess& entry = c.node({"spin"});
  DaemonProcess& runner = c.node({"sleep"}, 2, in_time ? "" : "drain_timeout_ms = 200");
  c.log_outcomes();
  const Scene s = hold_one_ahead(c, entry, runner, in_time ? 1'500 : 3'000, /*commit=*/false);
  const std::string first = ClusterFixture::name_of(runner);
  runner.signal(SIGTERM);
  const std::optional<int> code = runner.wait_exit(30s);
  REQUIRE(code.has_value());
  CHECK(*code == 0);
  // The runner claimed nothing after the SIGTERM: the queued job is still queued.
  CHECK(state_of(entry.port(), s.queued) == "queued");
  const auto held = record(entry.port(), s.ahead);
  if (in_time) {
    CHECK(text(held, "state") == "completed");
    CHECK(text(held, "node") == first);
    CHECK(held.at("attempt").as_int64() == 1);
    for (const std::uint64_t id : {s.long_committed, s.long_high}) {
      CHECK(state_of(entry.port(), id) == "completed");
    }
  } else {
    CHECK(text(held, "state") == "queued");  // not started, so not ended: given back
    for (const std::uint64_t id : {s.long_committed, s.long_high}) {
      const auto o = record(entry.port(), id);
      CHECK(text(o, "state") == "cancelled");
      CHECK(text(o, "cause") == "shutdown");
    }
  }
  DaemonProcess& heir = c.node({"sleep"}, 4);
  for (const std::uint64_t id : s.all()) {
    REQUIRE(eventually([&] { return terminal(state_of(entry.port(), id)); }, 60s));
  }
  const auto queued = record(entry.port(), s.queued);
  CHECK(text(queued, "state") == "completed");
  CHECK(text(queued, "node") == ClusterFixture::name_of(heir));
  if (!in_time) {
    const auto o = record(entry.port(), s.ahead);
    CHECK(text(o, "state") == "completed");
    CHECK(text(o, "node") == ClusterFixture::name_of(heir));
    CHECK(o.at("attempt").as_int64() == 2);  // the first was the runner's claim
  }
  for (const std::uint64_t id : s.spins) CHECK(state_of(entry.port(), id) == "completed");
  one_outcome_each(c, s);
}

TEST_CASE("[cluster] claim_ahead sets how many claimed jobs a node holds beyond its workers, "
          "the first ones in claim order" * doctest::timeout(180)) {
  std::string key;
  std::size_t held = 0;
  SUBCASE("by default a quarter of the workers, at least one") { held = 3; }
  SUBCASE("claim_ahead = 0: none") { key = "claim_ahead = 0"; held = 2; }
  SUBCASE("claim_ahead = 3") { key = "claim_ahead = 3"; held = 5; }
  ClusterFixture c;
  DaemonProcess& entry = c.node({"spin"});
  c.log_outcomes();
  // Queued before the runner starts, so its first claim already finds a backlog: classes and
  // budgets mixed, and a spin job for the entry node meanwhile.
  const std::uint16_t p = entry.port();
  std::vector<std::uint64_t> jobs;
  const char* classes[] = {"critical", "high", "normal", "sheddable"};
  for (int i = 0; i < 7; ++i) {
    // Says it is short (expected_ms), so that admission takes it and the jobs behind it.
    jobs.push_back(submit_later(p, fmt::format(R"({{"kind":"sleep","expected_ms":1,"args":{{"ms":30000}},"priority":"{}","timeout_ms":{}}})",
                                               classes[i % 4], 40'000 + 3'000 * (7 - i))));
  }
  const std::uint64_t spin = submit_later(p, R"({"kind":"spin","args":{"ms":5},"timeout_ms":5000})");
  DaemonProcess& runner = c.node({"sleep"}, 2, "", key);
  const std::string held_text = std::to_string(held);
  REQUIRE(eventually([&] {
    return metric(runner.port(), "sandglass_cluster_held_jobs") == static_cast<double>(held) &&
           running_on(c, runner) == held_text;
  }));
  // No more than that, however often the claimer looks (every 100 ms at the least).
  std::this_thread::sleep_for(1s);
  CHECK(running_on(c, runner) == held_text);
  CHECK(c.pg.scalar("SELECT count(*) FROM sandglass_jobs WHERE state = 'queued'") ==
        std::to_string(jobs.size() - held));
  // The jobs it holds come first in claim order: no queued job is ahead of a held one.
  CHECK(c.pg.scalar("SELECT count(*) FROM sandglass_jobs q JOIN sandglass_jobs r ON r.state = 'running' "
                    "WHERE q.state = 'queued' AND (q.priority, q.deadline) < (r.priority, r.deadline)") == "0");
  for (const std::uint64_t id : jobs) {
    CHECK(http(entry.port(), "DELETE", "/v1/jobs/" + std::to_string(id)).status == 200);
  }
  for (const std::uint64_t id : jobs) {
    REQUIRE(eventually([&] { return terminal(state_of(p, id)); }));
  }
  REQUIRE(eventually([&] { return state_of(p, spin) == "completed"; }));
  CHECK(c.pg.scalar("SELECT count(*) FROM outcome_log") == std::to_string(jobs.size() + 1));
  CHECK(c.pg.scalar("SELECT count(DISTINCT id) FROM outcome_log") == std::to_string(jobs.size() + 1));
}

}  // TEST_SUITE
