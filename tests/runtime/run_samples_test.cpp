// Run-time samples reach their estimates (runtime/estimate_state.hpp): never lost, and
// before the job's outcome is published, to a handle or to its callback alone.
#include <sandglass/runtime.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <latch>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using sandglass::EstimateSnapshot;
using sandglass::JobContext;
using sandglass::Outcome;
using sandglass::Runtime;

namespace {

constexpr auto kForever = std::chrono::hours{1};  // samples never age out in a test

std::uint64_t samples_of(const Runtime& rt, const std::string& key) {
  for (const EstimateSnapshot& e : rt.estimates()) {
    if (e.key == key) return e.samples;
  }
  return 0;
}

// Submits `keys.size()` jobs without keeping their handles and returns once every outcome
// callback ran.
void run_without_handles(Runtime& rt, const std::vector<std::string>& keys) {
  std::latch done{static_cast<std::ptrdiff_t>(keys.size())};
  for (const std::string& key : keys) {
    rt.submit({.kind = "noop", .budget = 10s, .estimate_key = key}, [](JobContext&) {},
              [&done](const Outcome&) { done.count_down(); });
  }
  done.wait();
}

}  // namespace

TEST_SUITE("Runtime run samples") {
  TEST_CASE("runs without a handle reach the estimate before the next outcome a handle reads" *
            doctest::timeout(30)) {
    Runtime rt{{.workers = 1, .capacity = 128, .estimate_max_age = kForever}};
    SUBCASE("more runs of one key than a batch holds") {
      run_without_handles(rt, std::vector<std::string>(70, "a"));
      rt.submit({.kind = "noop", .budget = 10s, .estimate_key = "a"}, [](JobContext&) {}).wait();
      CHECK(samples_of(rt, "a") == 71);
    }
    SUBCASE("runs of two keys in turn") {
      std::vector<std::string> keys;
      for (int i = 0; i < 30; ++i) keys.push_back(i % 3 == 0 ? "b" : "a");
      run_without_handles(rt, keys);
      // Another key's run: the batch of the last key is recorded before this outcome too.
      rt.submit({.kind = "noop", .budget = 10s, .estimate_key = "c"}, [](JobContext&) {}).wait();
      CHECK(samples_of(rt, "a") == 20);
      CHECK(samples_of(rt, "b") == 10);
      CHECK(samples_of(rt, "c") == 1);
    }
    rt.shutdown(1s);
  }

  TEST_CASE("a job with only a callback finds its own run in the estimate when the callback runs" *
            doctest::timeout(30)) {
    // One worker runs the jobs in submission order (same budget), two keys in turn: when the
    // callback of a key's n-th job runs, that job's run and every earlier one of its key are
    // in the estimate (more, if the worker ran ahead of the callback).
    Runtime rt{{.workers = 1, .capacity = 128, .estimate_max_age = kForever}};
    constexpr std::size_t kJobs = 80;
    std::vector<std::uint64_t> seen(kJobs);
    std::latch done{static_cast<std::ptrdiff_t>(kJobs)};
    for (std::size_t i = 0; i < kJobs; ++i) {
      const std::string key = i % 2 == 0 ? "even" : "odd";
      rt.submit({.kind = "noop", .budget = 10s, .estimate_key = key}, [](JobContext&) {},
                [&, i, key](const Outcome&) {
                  seen[i] = samples_of(rt, key);
                  done.count_down();
                });
    }
    done.wait();
    for (std::size_t i = 0; i < kJobs; ++i) {
      CAPTURE(i);
      CHECK(seen[i] >= i / 2 + 1);
    }
    CHECK(samples_of(rt, "even") == kJobs / 2);
    CHECK(samples_of(rt, "odd") == kJobs / 2);
    rt.shutdown(1s);
  }

  TEST_CASE("runs without a handle are all in the estimate after shutdown" * doctest::timeout(30)) {
    Runtime rt{{.workers = 2, .capacity = 128, .estimate_max_age = kForever}};
    run_without_handles(rt, std::vector<std::string>(45, "a"));
    rt.shutdown(1s);
    CHECK(samples_of(rt, "a") == 45);
  }
}
