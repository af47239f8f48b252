// handoff_bench.cpp — job hand-off throughput of the Sandglass runtime against
// `boost::asio::thread_pool`, and the cost of one `JobContext::checkpoint()`.
//
// What it measures:
//   BM_AsioThreadPool   one producer thread (the benchmark thread) posts kBatch no-op lambdas
//                       to an `asio::thread_pool` with 2 threads and waits on a std::latch until
//                       all of them ran.
//   BM_AsioThreadPoolWithResult  as above, plus a std::promise / std::future per job: a result
//                       the submitter could wait for, as every Sandglass job has.
//   BM_SandglassRuntime one producer submits kBatch jobs `{.kind = "noop", .budget = 10s}` to a
//                       `sandglass::Runtime` with 2 workers; each handler calls
//                       `ctx.checkpoint()`. The 3-argument `submit` is used and the outcome
//                       callback counts a std::latch down, so the producer never waits on a
//                       handle; an iteration ends when every job has its outcome. Every outcome
//                       must be `Reason::ok`; otherwise the benchmark reports an error.
//   BM_Checkpoint       `ctx.checkpoint()` on a JobContext built directly around a CancelSource
//                       that is never cancelled: time per iteration = ns per checkpoint.
//
// The pool / runtime is created once per benchmark run (outside the timed loop), so thread
// start-up is not measured; each timed iteration is one batch of kBatch jobs. Throughput is the
// `items_per_second` counter (jobs/s); times are wall-clock (UseRealTime), because the
// benchmark thread mostly waits for the workers.
//
// Run (from the repository root):
//   cmake -S . -B build -G Ninja -DSANDGLASS_INSTALL_TEST=OFF
//   ninja -C build sandglass-handoff-bench
//   ./build/bench/sandglass-handoff-bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
// Numbers on a 2-core machine are noisy; compare the two hand-offs within one run.
#include <sandglass/budget_policy.hpp>
#include <sandglass/cancel.hpp>
#include <sandglass/deadline.hpp>
#include <sandglass/job_context.hpp>
#include <sandglass/outcome.hpp>
#include <sandglass/runtime.hpp>

#include <benchmark/benchmark.h>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <future>
#include <latch>
#include <string>

namespace {

using namespace std::chrono_literals;

constexpr std::size_t kWorkers = 2;
constexpr std::int64_t kBatch = 100'000;  // jobs per timed iteration

void BM_AsioThreadPool(benchmark::State& state) {
  boost::asio::thread_pool pool{kWorkers};
  for (auto _ : state) {
    std::latch done{kBatch};
    for (std::int64_t i = 0; i < kBatch; ++i) {
      boost::asio::post(pool, [&done] { done.count_down(); });
    }
    done.wait();
  }
  pool.join();
  state.SetItemsProcessed(state.iterations() * kBatch);
}
BENCHMARK(BM_AsioThreadPool)->UseRealTime()->MinTime(1.0)->Unit(benchmark::kMillisecond);

// The same, but every job also gets a result its submitter can wait for (a std::promise, as
// asio::use_future would make): closer to what a Sandglass job carries (an outcome per job).
void BM_AsioThreadPoolWithResult(benchmark::State& state) {
  boost::asio::thread_pool pool{kWorkers};
  for (auto _ : state) {
    std::latch done{kBatch};
    for (std::int64_t i = 0; i < kBatch; ++i) {
      std::promise<int> result;
      std::future<int> future = result.get_future();
      boost::asio::post(pool, [&done, result = std::move(result)]() mutable {
        result.set_value(0);
        done.count_down();
      });
      benchmark::DoNotOptimize(future);
    }
    done.wait();
  }
  pool.join();
  state.SetItemsProcessed(state.iterations() * kBatch);
}
BENCHMARK(BM_AsioThreadPoolWithResult)->UseRealTime()->MinTime(1.0)->Unit(benchmark::kMillisecond);

void BM_SandglassRuntime(benchmark::State& state) {
  // Room for a whole batch: the producer may run far ahead of the workers.
  sandglass::Runtime rt{{.workers = kWorkers, .capacity = kBatch + 1024}};
  std::atomic<std::uint64_t> not_ok{0};
  for (auto _ : state) {
    std::latch done{kBatch};
    for (std::int64_t i = 0; i < kBatch; ++i) {
      rt.submit({.kind = "noop", .budget = 10s},
                [](sandglass::JobContext& ctx) { ctx.checkpoint(); },
                [&done, &not_ok](const sandglass::Outcome& o) {
                  if (o.reason != sandglass::Reason::ok) {
                    not_ok.fetch_add(1, std::memory_order_relaxed);
                  }
                  done.count_down();
                });
    }
    done.wait();
  }
  rt.shutdown(1s);
  state.SetItemsProcessed(state.iterations() * kBatch);
  if (const std::uint64_t bad = not_ok.load(); bad != 0) {
    state.SkipWithError(("jobs without outcome ok: " + std::to_string(bad)).c_str());
  }
}
BENCHMARK(BM_SandglassRuntime)->UseRealTime()->MinTime(1.0)->Unit(benchmark::kMillisecond);

void BM_Checkpoint(benchmark::State& state) {
  sandglass::CancelSource source;
  const sandglass::BudgetPolicy policy{};
  sandglass::JobContext ctx{1, "k", sandglass::Deadline::never(), source.token(), policy};
  for (auto _ : state) {
    ctx.checkpoint();
  }
  state.SetItemsProcessed(state.iterations());
  if (ctx.cancelled()) state.SkipWithError("context was cancelled");
}
BENCHMARK(BM_Checkpoint);

}  // namespace

BENCHMARK_MAIN();
