// Outcomes are announced only when someone waits for them (to the waiter's node) or when their
// node shares its run times (on sandglass_outcome) (migrations/functions.sql, "Announced outcomes"): every waiter
// is still answered, on any node, however its wait and its job's end interleave; a job nobody
// waits for costs no NOTIFY unless it is shared; the nodes still learn each other's run times.
#include "cluster/cluster_fixture.hpp"
#include "cluster/outcome_listener.hpp"

#include <doctest/doctest.h>

#include <future>
#include <set>

using namespace sandglass::testing;
using namespace std::chrono_literals;

namespace {

const char* const kPriorities[] = {"critical", "high", "normal", "sheddable"};

// A sleep job of `ms` (keyed when `key` is not empty) with a budget of `timeout_ms`.
std::string sleep_job(int ms, int timeout_ms, const char* priority, const std::string& key = {}) {
  return fmt::format(R"({{"kind":"sleep","args":{{"ms":{}}},"timeout_ms":{},"priority":"{}"{}}})", ms,
                     timeout_ms, priority, key.empty() ? "" : R"(,"idempotency_key":")" + key + "\"");
}

}  // namespace

TEST_SUITE("cluster") {

TEST_CASE("a waiter on one node is answered when its job runs on another: submitted waiting, or a "
          "keyed retry that attaches while the job is queued, running or over" *
          doctest::timeout(180)) {
  ClusterFixture c;
  DaemonProcess& a = c.node({"spin"}, 1);
  DaemonProcess& b = c.node({"sleep"}, 4);
  // Submitted on the node that does not serve the kind, waiting: sleep jobs from A run on B,
  // spin jobs from B on A; four classes, several budgets.
  struct Sent {
    std::string runner;
    std::future<HttpAnswer> answer;
  };
  std::vector<Sent> sent;
  for (int i = 0; i < 32; ++i) {
    const bool sleep = i % 2 == 0;
    const std::uint16_t port = sleep ? a.port() : b.port();
    const std::string body =
        sleep ? sleep_job(1 + 3 * (i % 7), 5'000 + 1'000 * (i % 5), kPriorities[i % 4])
              : fmt::format(R"({{"kind":"spin","args":{{"ms":{}}},"timeout_ms":{},"priority":"{}"}})",
                            1 + i % 3, 5'000 + 1'000 * (i % 5), kPriorities[i % 4]);
    sent.push_back({ClusterFixture::name_of(sleep ? b : a),
                    std::async(std::launch::async, [port, body] { return post_job(port, body); })});
  }
  for (Sent& s : sent) {
    const HttpAnswer answer = s.answer.get();
    REQUIRE(answer.status == 200);
    CHECK(text(json_of(answer), "state") == "completed");
    CHECK(text(json_of(answer), "node") == s.runner);
  }

  // Keyed sleep jobs submitted on B without waiting (they run on B); retries on A attach and
  // wait: half at once (the job queued or running), half once those are answered (some over,
  // the longer ones still running).
  constexpr int kKeyed = 24;
  std::vector<std::uint64_t> ids;
  std::vector<std::string> bodies;
  for (int i = 0; i < kKeyed; ++i) {
    bodies.push_back(sleep_job(20 + 40 * (i % 8), 10'000, kPriorities[i % 4], "attach-" + std::to_string(i)));
    ids.push_back(submit_later(b.port(), bodies.back()));
  }
  const auto retry = [&](int from, int to) {
    std::vector<std::future<HttpAnswer>> answers;
    for (int i = from; i < to; ++i) {
      answers.push_back(std::async(std::launch::async, [&, i] { return post_job(a.port(), bodies[static_cast<std::size_t>(i)]); }));
    }
    for (int i = from; i < to; ++i) {
      const HttpAnswer answer = answers[static_cast<std::size_t>(i - from)].get();
      REQUIRE(answer.status == 200);
      const auto o = json_of(answer);
      CHECK(o.at("id").to_number<std::uint64_t>() == ids[static_cast<std::size_t>(i)]);
      CHECK(text(o, "state") == "completed");
      CHECK(text(o, "node") == ClusterFixture::name_of(b));
    }
  };
  retry(0, kKeyed / 2);
  retry(kKeyed / 2, kKeyed);
  CHECK(c.pg.scalar("SELECT count(*) FROM sandglass_jobs WHERE state <> 'done'") == "0");
}

TEST_CASE("waiters that attach just as their jobs end lose no answer" * doctest::timeout(180)) {
  ClusterFixture c;
  DaemonProcess& entry = c.node({"spin"}, 1);
  DaemonProcess& runner = c.node({"sleep"}, 4);
  // Each task submits a short keyed job on the runner without waiting and at once retries it
  // on the entry node, waiting: the retry's attach lands while the job is queued, running, or
  // being written, or after. The runner writes outcomes many times within kShareRunTimes, so
  // most of its exchanges do not share their run times: each answer rests on the attach's mark.
  constexpr int kTasks = 16;
  constexpr int kEach = 12;
  std::vector<std::future<int>> tasks;
  for (int t = 0; t < kTasks; ++t) {
    tasks.push_back(std::async(std::launch::async, [&, t] {
      int answered = 0;
      for (int i = 0; i < kEach; ++i) {
        const std::string body = sleep_job(1 + (t + i) % 4, 10'000, kPriorities[(t + i) % 4],
                                           fmt::format("race-{}-{}", t, i));
        const std::uint64_t id = submit_later(runner.port(), body);
        const HttpAnswer answer = post_job(entry.port(), body);
        if (answer.status == 200 && id_of(answer) == id && text(json_of(answer), "state") == "completed") {
          ++answered;
        }
      }
      return answered;
    }));
  }
  int answered = 0;
  for (auto& t : tasks) answered += t.get();
  CHECK(answered == kTasks * kEach);
  CHECK(c.pg.scalar("SELECT count(*) FROM sandglass_jobs WHERE state = 'done'") == std::to_string(kTasks * kEach));
}

TEST_CASE("a job nobody waits for is not announced unless its node shares its run times" *
          doctest::timeout(120)) {
  ClusterFixture c;
  DaemonProcess& a = c.node({"sleep"}, 2);
  OutcomeListener heard{c.pg};
  OutcomeListener heard_by_a{c.pg, node_channel(c.pg, "outcome", ClusterFixture::name_of(a))};
  // Ended in the database, never shared: expired in the queue (nobody serves spin), cancelled
  // in the queue; only the one with a waiter is announced, to its waiter's node.
  const std::uint64_t expired =
      submit_later(a.port(), R"({"kind":"spin","args":{"ms":1},"timeout_ms":300})");
  const std::uint64_t cancelled =
      submit_later(a.port(), R"({"kind":"spin","args":{"ms":1},"timeout_ms":30000})");
  CHECK(text(json_of(http(a.port(), "DELETE", "/v1/jobs/" + std::to_string(cancelled))), "reason") ==
        "cancelled_in_queue");
  const HttpAnswer waited = post_job(a.port(), R"({"kind":"spin","args":{"ms":1},"timeout_ms":300})");
  CHECK(waited.status == 504);
  REQUIRE(eventually([&] { return text(record(a.port(), expired), "reason") == "expired_in_queue"; }));
  CHECK(heard.announced().empty());
  CHECK(heard_by_a.announced() == std::vector<std::uint64_t>{id_of(waited)});

  // Run by the node: a burst of jobs without waiters ends within a few of its exchanges, and
  // only the exchanges that share run times (one per kShareRunTimes) announce theirs.
  constexpr int kBurst = 120;
  std::vector<std::future<std::vector<std::uint64_t>>> senders;
  for (int t = 0; t < 8; ++t) {
    senders.push_back(std::async(std::launch::async, [&] {
      std::vector<std::uint64_t> mine;
      for (int i = 0; i < kBurst / 8; ++i) {
        mine.push_back(submit_later(a.port(), R"({"kind":"sleep","args":{"ms":1},"timeout_ms":30000})"));
      }
      return mine;
    }));
  }
  std::set<std::uint64_t> burst;
  for (auto& s : senders) {
    for (const std::uint64_t id : s.get()) burst.insert(id);
  }
  REQUIRE(eventually([&] {
    return c.pg.scalar("SELECT count(*) FROM sandglass_jobs WHERE kind = 'sleep' AND state = 'done'") ==
           std::to_string(kBurst);
  }));
  const std::vector<std::uint64_t> shared = heard.announced();
  INFO("announced ", shared.size(), " of ", kBurst);
  CHECK(shared.size() >= 1);  // the burst's first outcome at least: nothing was shared before
  CHECK(shared.size() < kBurst / 2);
  for (const std::uint64_t id : shared) CHECK(burst.contains(id));
}

TEST_CASE("a node learns the run times of jobs another node ran for nobody waiting" *
          doctest::timeout(120)) {
  ClusterFixture c;
  DaemonProcess& a = c.node({"spin"}, 1);
  DaemonProcess& b = c.node({"sleep"}, 2);
  // Three sleeps of 200 ms on B, one after the other, nobody waiting: each is the only outcome
  // of its exchange, so B shares it.
  for (int i = 0; i < 3; ++i) {
    const std::uint64_t id = submit_later(b.port(), R"({"kind":"sleep","args":{"ms":200},"timeout_ms":30000})");
    REQUIRE(eventually([&] { return text(record(b.port(), id), "state") == "completed"; }));
  }
  // A has never run sleep, yet it knows the kind takes 200 ms: it refuses a 100 ms budget alone.
  const HttpAnswer r = post_job(a.port(), R"({"kind":"sleep","args":{"ms":200},"timeout_ms":100})");
  CHECK(r.status == 503);
  CHECK(text(json_of(r), "reason") == "deadline_implausible");
  CHECK(metric(a.port(), "sandglass_cluster_refused_here_total") == 1);
}

}  // TEST_SUITE
