#include "workers/job_pool.hpp"

#include "workers/job.hpp"

#include <doctest/doctest.h>

#include <cstddef>

using sandglass::detail::Job;
using sandglass::detail::JobPool;
using sandglass::detail::JobRef;

TEST_SUITE("JobPool") {
  TEST_CASE("a block holds one job record and nothing more, or a record and its callback") {
    CHECK(JobPool::block_bytes(JobPool::Size::plain) == sizeof(Job));
    CHECK(JobPool::block_bytes(JobPool::Size::with_callback) ==
          sizeof(Job) + sizeof(sandglass::OutcomeCallback));
  }

  TEST_CASE("a job record fits malloc's 256-byte chunk, which has 248 usable bytes") {
    // glibc rounds a request up to a multiple of 16 with 8 bytes of header, so 248 bytes is
    // the most that costs one 256-byte chunk: the budget per queued job.
    CHECK(sizeof(Job) <= 248);
  }

  TEST_CASE("a record's last reference returns it, and a new record reuses the block") {
    JobRef first = Job::make({});
    const Job* const address = first.get();
    CHECK(first.use_count() == 1);
    JobRef second = first;
    CHECK(first.use_count() == 2);
    first.reset();
    CHECK(second.use_count() == 1);
    second.reset();
    JobRef next = Job::make({});
    CHECK(next.use_count() == 1);
#if !defined(__SANITIZE_ADDRESS__)
    CHECK(next.get() == address);  // the pool hands out the block this thread freed last
#else
    (void)address;
#endif
  }

  TEST_CASE("a record with a callback comes from the second size and runs nothing when dropped "
            "unpublished") {
    int calls = 0;
    JobRef job = Job::make([&](const sandglass::Outcome&) { ++calls; });
    JobRef plain = Job::make({});
    CHECK(job.use_count() == 1);
    job.reset();  // destroyed as a JobWithCallback (ASan: no leak of the callback's state)
    plain.reset();
    CHECK(calls == 0);
  }
}
