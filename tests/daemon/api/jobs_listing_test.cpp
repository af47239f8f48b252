// The listing over JobRecords' index in process: read while jobs are submitted and finish, and
// the index's bound.
#include "daemon/api/jobs_listing.hpp"

#include <doctest/doctest.h>

#include <boost/json/parse.hpp>

#include <atomic>
#include <latch>
#include <set>
#include <thread>
#include <vector>

using namespace sandglass;
using namespace sandglass::daemon;

namespace {

// `query` as in a URL ("?state=running"); the parser takes what follows the '?'.
boost::json::object listing(const JobRecords& records, std::string_view query) {
  if (query.starts_with('?')) query.remove_prefix(1);
  auto q = parse_listing_query(query);
  REQUIRE(std::holds_alternative<ListingQuery>(q));
  return boost::json::parse(listing_json(records, std::get<ListingQuery>(q), Clock::now())).as_object();
}

// Submits as the daemon does: the outcome callback records the outcome, then the record is added.
JobHandle submit(Runtime& rt, JobRecords& records, const std::string& kind, JobHandler handler) {
  JobHandle h = rt.submit({.kind = kind, .budget = std::chrono::seconds{10}}, std::move(handler),
                          [&records](const Outcome& o) { records.finish(o); });
  records.add(h, kind);
  return h;
}

}  // namespace

TEST_SUITE("jobs listing") {
  TEST_CASE("the listing reads while jobs are submitted and finish and lists each job once, newest first" *
            doctest::timeout(60)) {
    JobRecords records{RecordRetention{}};  // outlives the runtime and its outcome callbacks
    Runtime rt{{.workers = 2, .capacity = 1024}};
    constexpr int kPerThread = 300;
    std::latch start{3};
    std::atomic<bool> done{false};
    std::vector<std::jthread> submitters;
    for (int t = 0; t < 2; ++t) {
      submitters.emplace_back([&, t] {
        start.arrive_and_wait();
        for (int i = 0; i < kPerThread; ++i) {
          submit(rt, records, t == 0 ? "a" : "b", [](JobContext&) {});
        }
      });
    }
    std::size_t reads = 0;
    std::jthread reader{[&] {
      start.arrive_and_wait();
      while (!done.load(std::memory_order_relaxed)) {
        const auto page = listing(records, "?limit=1000");
        std::uint64_t previous = UINT64_MAX;
        for (const auto& j : page.at("jobs").as_array()) {
          const auto id = j.at("id").to_number<std::uint64_t>();
          CHECK(id < previous);
          previous = id;
        }
        ++reads;
      }
    }};
    for (auto& s : submitters) s.join();
    rt.shutdown(std::chrono::seconds{10});  // every job has its outcome
    done.store(true, std::memory_order_relaxed);
    reader.join();
    CHECK(reads > 0);

    const auto all = listing(records, "?limit=1000");
    std::set<std::uint64_t> ids;
    for (const auto& j : all.at("jobs").as_array()) ids.insert(j.at("id").to_number<std::uint64_t>());
    CHECK(ids.size() == 2 * kPerThread);
    CHECK(all.at("next_cursor").is_null());
    CHECK(listing(records, "?kind=a&limit=1000").at("jobs").as_array().size() == kPerThread);
    CHECK(listing(records, "?state=completed&limit=1000").at("jobs").as_array().size() == 2 * kPerThread);
    CHECK(records.live_ids().empty());
  }

  TEST_CASE("the index keeps the most recent submissions only") {
    JobRecords records{RecordRetention{.max_count = 10}};
    Runtime rt{{.workers = 1, .capacity = 16}};
    std::vector<JobHandle> handles;
    for (int i = 0; i < 1100; ++i) {
      handles.push_back(submit(rt, records, "a", [](JobContext&) {}));
      handles.back().wait();
    }
    rt.shutdown(std::chrono::seconds{10});  // and every outcome callback has returned
    const std::vector<JobId> recent = records.recent_ids();
    CHECK(recent.size() == 10 + 1024);
    CHECK(recent.back() == handles.back().id());
    // Terminal records beyond max_count are forgotten: the listing shows what is left.
    CHECK(listing(records, "?limit=1000").at("jobs").as_array().size() == 10);
  }

  TEST_CASE("a live job is listed with remaining_ms and found by state and cause" * doctest::timeout(30)) {
    JobRecords records{RecordRetention{}};
    Runtime rt{{.workers = 1, .capacity = 16}};
    std::latch started{1};
    const JobHandle h = submit(rt, records, "slow", [&started](JobContext& ctx) {
      started.count_down();
      while (!ctx.cancelled()) std::this_thread::yield();
      ctx.checkpoint();
    });
    started.wait();
    const auto running = listing(records, "?state=running");
    REQUIRE(running.at("jobs").as_array().size() == 1);
    const auto& r = running.at("jobs").as_array()[0].as_object();
    CHECK(r.at("remaining_ms").to_number<std::int64_t>() > 0);
    CHECK(r.at("remaining_ms").to_number<std::int64_t>() <= 10'000);
    records.cancel(h.id());
    CHECK(h.wait().cause == CancelCause::caller);
    // The record turns terminal once the outcome callback finished it, just after the handle.
    REQUIRE(records.outcome_until(h.id(), Deadline::never()).has_value());
    CHECK(listing(records, "?state=cancelled&cause=caller").at("jobs").as_array().size() == 1);
    CHECK(listing(records, "?state=running").at("jobs").as_array().empty());
  }
}
