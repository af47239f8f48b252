// A program whose Runtime has static storage duration: it is destroyed during exit, after the
// main thread's thread_local objects (the job pool's per-thread cache among them). Run by ctest
// as its own process (tests/CMakeLists.txt): it fails if the process does not exit with 0 (a
// double free at exit aborts it) or if a job did not end as it should.
#include <sandglass/runtime.hpp>

#include <chrono>
#include <cstdio>

namespace {

sandglass::Runtime g_runtime{{.workers = 2, .capacity = 256}};

}  // namespace

int main() {
  using namespace std::chrono_literals;
  constexpr int kJobs = 2000;
  int ok = 0;
  for (int i = 0; i < kJobs; ++i) {
    // Mixed kinds, classes and budgets; jobs made on this thread, freed on the workers.
    const auto priority = static_cast<sandglass::Priority>(i % 4);
    const char* kind = i % 2 == 0 ? "even" : "odd";
    const sandglass::Outcome o =
        g_runtime
            .submit({.kind = kind, .priority = priority, .budget = 10s + std::chrono::seconds{i % 7}},
                    [](sandglass::JobContext& ctx) { ctx.checkpoint(); })
            .wait();
    if (o.reason == sandglass::Reason::ok) ++ok;
  }
  std::printf("%d of %d jobs ok\n", ok, kJobs);
  return ok == kJobs ? 0 : 1;
}
