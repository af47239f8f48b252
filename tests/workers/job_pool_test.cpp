#include "workers/job_pool.hpp"

#include "workers/job.hpp"

#include <doctest/doctest.h>

#include <cstddef>
#include <memory>

using sandglass::detail::Job;
using sandglass::detail::JobPool;

namespace {

// Records the size of what allocate_shared asks for (its control block with the record in it).
std::size_t g_requested = 0;

template <typename T>
struct RecordingAllocator {
  using value_type = T;
  RecordingAllocator() noexcept = default;
  template <typename U>
  RecordingAllocator(const RecordingAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    g_requested = n * sizeof(T);
    return static_cast<T*>(::operator new(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p); }
  template <typename U>
  bool operator==(const RecordingAllocator<U>&) const noexcept { return true; }
};

}  // namespace

TEST_SUITE("JobPool") {
  TEST_CASE("a job record and its shared_ptr control block fit one pool block") {
    // Else every job would bypass the pool (JobAllocator falls back to operator new).
    g_requested = 0;
    auto job = std::allocate_shared<Job>(RecordingAllocator<Job>{});
    CHECK(g_requested >= sizeof(Job));
    CHECK(g_requested <= JobPool::block_bytes());
  }
}
