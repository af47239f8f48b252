// Per-node channels (migrations/functions.sql, "Announced outcomes"; daemon/cluster/listener.cpp):
// with three real nodes, the one that neither runs nor waits for any job hears no outcome and
// no cancel, while waits and cancels across nodes are answered by their NOTIFYs (not by the
// waiters' timers: their budgets are far off). The test LISTENs on the nodes' own channels.
#include "cluster/cluster_fixture.hpp"
#include "cluster/outcome_listener.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <future>
#include <set>

using namespace sandglass::testing;
using namespace std::chrono_literals;

namespace {

const char* const kPriorities[] = {"critical", "high", "normal", "sheddable"};

std::string owner_of(ClusterFixture& c, const DaemonProcess& d) {
  return c.pg.scalar("SELECT owner FROM sandglass_nodes WHERE NOT lost AND node = '" +
                     ClusterFixture::name_of(d) + "'");
}

}  // namespace

TEST_SUITE("cluster") {

TEST_CASE("a node hears no outcome or cancel of jobs it neither runs nor waits for, while waits and "
          "cancels across nodes are answered" * doctest::timeout(180)) {
  ClusterFixture c;
  DaemonProcess& entry = c.node({"spin"}, 1);    // submits, reads and cancels; runs nothing here
  DaemonProcess& runner = c.node({"sleep"}, 4);  // runs every job
  DaemonProcess& bystander = c.node({"sql"}, 1); // serves a kind nobody submits
  OutcomeListener to_entry{c.pg, node_channel(c.pg, "outcome", ClusterFixture::name_of(entry))};
  OutcomeListener to_bystander{c.pg, node_channel(c.pg, "outcome", ClusterFixture::name_of(bystander))};
  NotifyListener bystander_cancels{c.pg, node_channel(c.pg, "cancel", owner_of(c, bystander))};
  NotifyListener runner_cancels{c.pg, node_channel(c.pg, "cancel", owner_of(c, runner))};
  std::set<std::uint64_t> waited;  // the jobs the entry node waited for

  // Submitted waiting on the entry node, run on the runner: four classes, several budgets.
  std::vector<std::future<HttpAnswer>> submitted;
  for (int i = 0; i < 24; ++i) {
    const std::string body = fmt::format(R"({{"kind":"sleep","args":{{"ms":{}}},"timeout_ms":{},"priority":"{}"}})",
                                         1 + 5 * (i % 5), 20'000 + 2'000 * (i % 4), kPriorities[i % 4]);
    submitted.push_back(std::async(std::launch::async, [&, body] { return post_job(entry.port(), body); }));
  }
  // Submitted on the runner without waiting, read on the entry node with GET ?wait=true.
  std::vector<std::future<HttpAnswer>> read;
  for (int i = 0; i < 8; ++i) {
    const std::uint64_t id = submit_later(
        runner.port(), fmt::format(R"({{"kind":"sleep","args":{{"ms":{}}},"timeout_ms":30000,"priority":"{}"}})",
                                   100 + 20 * i, kPriorities[i % 4]));
    waited.insert(id);
    read.push_back(std::async(std::launch::async, [&, id] {
      return http(entry.port(), "GET", "/v1/jobs/" + std::to_string(id) + "?wait=true");
    }));
  }
  for (auto& s : submitted) {
    const HttpAnswer a = s.get();
    REQUIRE(a.status == 200);
    waited.insert(id_of(a));
    CHECK(text(json_of(a), "state") == "completed");
    CHECK(text(json_of(a), "node") == ClusterFixture::name_of(runner));
  }
  for (auto& r : read) {
    const HttpAnswer a = r.get();
    REQUIRE(a.status == 200);
    CHECK(text(json_of(a), "state") == "completed");
  }

  // Long jobs running on the runner, cancelled by DELETE on the entry node.
  std::vector<std::uint64_t> cancelled;
  for (int i = 0; i < 4; ++i) {
    cancelled.push_back(submit_later(
        runner.port(), fmt::format(R"({{"kind":"sleep","args":{{"ms":20000}},"timeout_ms":30000,"priority":"{}"}})",
                                   kPriorities[i])));
  }
  REQUIRE(eventually([&] {
    return std::all_of(cancelled.begin(), cancelled.end(),
                       [&](std::uint64_t id) { return state_of(entry.port(), id) == "running"; });
  }, 20s));
  std::vector<std::string> expected_cancels;
  for (const std::uint64_t id : cancelled) {
    waited.insert(id);  // a DELETE waits for the job's end a short while
    const auto r = cancel_job(entry.port(), id);
    CHECK(text(r, "state") == "cancelled");
    CHECK(text(r, "reason") == "cancelled_while_running");
    CHECK(text(r, "cause") == "caller");
    expected_cancels.push_back(std::to_string(id) + " " + owner_of(c, runner));
  }

  // Each cancel went to the runner's incarnation only; the bystander heard nothing at all.
  std::vector<std::string> heard_cancels = runner_cancels.payloads();
  std::sort(heard_cancels.begin(), heard_cancels.end());
  std::sort(expected_cancels.begin(), expected_cancels.end());
  CHECK(heard_cancels == expected_cancels);
  CHECK(bystander_cancels.payloads().empty());
  CHECK(to_bystander.announced().empty());
  // The entry node heard only jobs it waited for (the others' samples are on sandglass_outcome).
  const std::vector<std::uint64_t> entry_heard = to_entry.announced();
  CHECK(!entry_heard.empty());
  for (const std::uint64_t id : entry_heard) CHECK(waited.contains(id));
  // Answered by NOTIFYs: no waiter on the entry node reached its timer.
  CHECK(metric(entry.port(), "sandglass_cluster_waits_timed_total") == 0);
}

}  // TEST_SUITE
