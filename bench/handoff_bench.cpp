// handoff_bench.cpp — micro benchmarks, in one binary so that ratios come from one run:
// job hand-off throughput of the Sandglass runtime against plain executors with the same
// thread count, and what deadlines and cancellation cost.
//
// Hand-off (one producer, the benchmark thread, submits kBatch no-op jobs; kWorkers threads
// run them; an iteration ends when all ran; jobs/s is the `items_per_second` counter):
//   BM_AsioThreadPool            `asio::post` of a lambda to an `asio::thread_pool`
//   BM_AsioThreadPoolWithResult  the same plus a std::promise / std::future per job: a result
//                                the submitter could wait for, as every Sandglass job has
//   BM_MutexDequePool            a std::mutex + std::condition_variable + std::deque of
//                                std::function pool: what one writes by hand
//   BM_TbbArena                  oneTBB: `task_arena::enqueue` into an arena of kWorkers
//                                threads (left out when built without libtbb-dev)
//   BM_SandglassRuntime          `Runtime::submit` of `{.kind = "noop", .budget = 300s}` with an
//                                outcome callback (estimate_max_age 10 s, see sandglass_runtime); the handler calls `ctx.checkpoint()`. Every
//                                outcome must be `Reason::ok`, or the benchmark reports an error
// Each hand-off benchmark also reports `cpu_ns_per_job`: the CPU time of the whole process
// (all threads: producers, workers, spinning) while it ran ÷ jobs, a figure that a loaded
// machine disturbs less than the rate; the Runtime's also `peak_queued`, the most jobs queued, and
// `stand_bys`, how often per batch a worker stood by behind the tiny jobs (RuntimeOptions::tiny_job).
// The same with four producer threads submitting a quarter of the batch each (the daemon's
// I/O threads submit concurrently): BM_AsioThreadPool4Producers, BM_MutexDequePool4Producers,
// BM_TbbArena4Producers, BM_SandglassRuntime4Producers.
// Latency at low load (one job at a time, the workers idle in between):
//   BM_SubmitToStart/0 (asio::thread_pool), /1 (Runtime): from the submit call until the
//                                handler's first instruction; counters p50_us and p99_us, and
//                                submit_p50_us / submit_p99_us: the submit (post) call alone
// Memory:
//   BM_BytesPerQueuedJob         heap bytes (malloc_usable_size) a queued job holds: 10,000
//                                jobs submitted behind a busy worker, counter bytes_per_job.
//                                Job records come from a pool (workers/job_pool.hpp) that is
//                                empty here (the runtimes before gave their blocks back), so
//                                every record is a fresh, counted allocation
// Costs:
//   BM_Checkpoint                `ctx.checkpoint()` on a context that is never cancelled
//   BM_AdmissionDecision/...     `DeadlineQueue::admit` with 256 jobs queued: /0 a job that is
//                                admitted (then removed again: the pair is timed), /1 a job
//                                rejected as deadline_implausible (the decision alone)
//   BM_RejectionLatency/...      `Runtime::submit` until the rejected outcome's callback ran
//                                (it runs inside submit): /0 queue_full, /1 deadline_implausible
//   BM_CancelToObserved/...      from `JobHandle::cancel()` until the running handler sees it:
//                                /0 a handler polling `ctx.cancelled()`, /1 one blocked in
//                                `ctx.sleep_for()`; counter `to_outcome_us`: until `wait()` returns
//   BM_DeadlineToObserved/...    from the job's deadline until its handler sees the deadline
//                                cancellation (the timer thread's lateness plus the wake-up);
//                                /0 polling, /1 sleeping
// The latency benchmarks report manual time: the time per iteration is the mean latency; the
// counters p50_us and p99_us are its median and 99th percentile.
//
// The pools and runtimes are created once per benchmark run (outside the timed loop), so thread
// start-up is not measured. Times are wall-clock (UseRealTime), because the benchmark thread
// mostly waits for the workers.
//
// Run (from the repository root):
//   cmake -S . -B build -G Ninja -DSANDGLASS_INSTALL_TEST=OFF
//   ninja -C build sandglass-handoff-bench
//   ./build/bench/sandglass-handoff-bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
// Numbers on a 2-core machine are noisy; compare within one run.
#include <sandglass/budget_policy.hpp>
#include <sandglass/cancel.hpp>
#include <sandglass/deadline.hpp>
#include <sandglass/deadline_queue.hpp>
#include <sandglass/job_context.hpp>
#include <sandglass/outcome.hpp>
#include <sandglass/runtime.hpp>

#include <benchmark/benchmark.h>
#include <malloc.h>
#include <time.h>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#if SANDGLASS_BENCH_HAVE_TBB
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <functional>
#include <future>
#include <latch>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

// Heap bytes allocated and freed by the thread that counts (BM_BytesPerQueuedJob).
thread_local bool tl_counting = false;
thread_local std::int64_t tl_live_bytes = 0;

}  // namespace

void* operator new(std::size_t size) {
  void* p = std::malloc(size == 0 ? 1 : size);
  if (p == nullptr) throw std::bad_alloc{};
  if (tl_counting) tl_live_bytes += static_cast<std::int64_t>(malloc_usable_size(p));
  return p;
}
void operator delete(void* p) noexcept {
  if (p != nullptr && tl_counting) tl_live_bytes -= static_cast<std::int64_t>(malloc_usable_size(p));
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept { operator delete(p); }

namespace {

using namespace std::chrono_literals;

// Runs `producers` threads that call submit(i) for their share of kBatch indices, and waits for
// them (not for the jobs).
template <typename Submit>
void produce(std::size_t producers, std::int64_t batch, const Submit& submit) {
  if (producers == 1) {
    for (std::int64_t i = 0; i < batch; ++i) submit(i);
    return;
  }
  std::vector<std::jthread> threads;
  const std::int64_t share = batch / static_cast<std::int64_t>(producers);
  for (std::size_t p = 0; p < producers; ++p) {
    threads.emplace_back([&submit, share] {
      for (std::int64_t i = 0; i < share; ++i) submit(i);
    });
  }
}

constexpr std::size_t kProducers = 4;

constexpr std::size_t kWorkers = 2;
constexpr std::int64_t kBatch = 100'000;  // jobs per timed iteration

// CPU time of the whole process, for cpu_ns_per_job.
double process_cpu_ns() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec);
}
// Sets cpu_ns_per_job from the process CPU time since `since` (process_cpu_ns()).
void report_cpu_per_job(benchmark::State& state, double since) {
  const double jobs = static_cast<double>(state.iterations() * kBatch);
  state.counters["cpu_ns_per_job"] = (process_cpu_ns() - since) / jobs;
}

void asio_pool(benchmark::State& state, std::size_t producers) {
  boost::asio::thread_pool pool{kWorkers};
  const double cpu_since = process_cpu_ns();
  for (auto _ : state) {
    std::latch done{kBatch};
    produce(producers, kBatch, [&](std::int64_t) {
      boost::asio::post(pool, [&done] { done.count_down(); });
    });
    done.wait();
  }
  report_cpu_per_job(state, cpu_since);
  pool.join();
  state.SetItemsProcessed(state.iterations() * kBatch);
}
void BM_AsioThreadPool(benchmark::State& state) { asio_pool(state, 1); }
void BM_AsioThreadPool4Producers(benchmark::State& state) { asio_pool(state, kProducers); }
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

// The pool one writes by hand: a mutex, a condition variable and a deque of std::function.
class MutexDequePool {
 public:
  explicit MutexDequePool(std::size_t threads) {
    for (std::size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { work(); });
  }
  ~MutexDequePool() {
    {
      std::lock_guard lock{mu_};
      stopping_ = true;
    }
    ready_.notify_all();
  }
  void post(std::function<void()> job) {
    {
      std::lock_guard lock{mu_};
      jobs_.push_back(std::move(job));
    }
    ready_.notify_one();
  }

 private:
  void work() {
    std::unique_lock lock{mu_};
    for (;;) {
      ready_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;
      std::function<void()> job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      job();
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> jobs_;  // guarded by mu_
  bool stopping_ = false;                   // guarded by mu_
  std::vector<std::jthread> threads_;       // last: joined first
};

void mutex_pool(benchmark::State& state, std::size_t producers) {
  MutexDequePool pool{kWorkers};
  const double cpu_since = process_cpu_ns();
  for (auto _ : state) {
    std::latch done{kBatch};
    produce(producers, kBatch, [&](std::int64_t) { pool.post([&done] { done.count_down(); }); });
    done.wait();
  }
  report_cpu_per_job(state, cpu_since);
  state.SetItemsProcessed(state.iterations() * kBatch);
}
void BM_MutexDequePool(benchmark::State& state) { mutex_pool(state, 1); }
void BM_MutexDequePool4Producers(benchmark::State& state) { mutex_pool(state, kProducers); }
BENCHMARK(BM_MutexDequePool)->UseRealTime()->MinTime(1.0)->Unit(benchmark::kMillisecond);

#if SANDGLASS_BENCH_HAVE_TBB
void tbb_arena(benchmark::State& state, std::size_t producers) {
  // kWorkers TBB worker threads serve the arena; the producers are not among its slots.
  tbb::global_control threads{tbb::global_control::max_allowed_parallelism, kWorkers + 1};
  tbb::task_arena arena{static_cast<int>(kWorkers), 0};
  const double cpu_since = process_cpu_ns();
  for (auto _ : state) {
    std::latch done{kBatch};
    produce(producers, kBatch, [&](std::int64_t) { arena.enqueue([&done] { done.count_down(); }); });
    done.wait();
  }
  report_cpu_per_job(state, cpu_since);
  state.SetItemsProcessed(state.iterations() * kBatch);
}
void BM_TbbArena(benchmark::State& state) { tbb_arena(state, 1); }
void BM_TbbArena4Producers(benchmark::State& state) { tbb_arena(state, kProducers); }
BENCHMARK(BM_TbbArena)->UseRealTime()->MinTime(1.0)->Unit(benchmark::kMillisecond);
#endif

void sandglass_runtime(benchmark::State& state, std::size_t producers) {
  // Room for a whole batch: the producers may run far ahead of the workers, and the queue
  // holds most of a batch. A no-op's measured run time includes preemption (on the loaded 2-core
  // VM a descheduled worker's no-op "ran" 44 ms, and after a stall of the VM it can be the only
  // sample younger than the default estimate_max_age of 20 ms): the predicted start (queued jobs
  // x mean run time / workers) then passes 10 s and admission rightly refuses
  // (deadline_implausible). So: 300 s budgets and samples kept for 10 s; the hand-off, not the
  // estimator's reaction to a stall, is measured here. A batch is one burst: with the adaptive
  // target (1 ms for no-ops) a batch that drains slower than the standing-queue interval on a
  // busy machine would be refused in part, so the target is far above a batch's drain time.
  const auto budget = std::chrono::seconds{300};
  sandglass::Runtime rt{{.workers = kWorkers,
                         .capacity = kBatch + 1024,
                         .estimate_max_age = std::chrono::seconds{10},
                         .queue_delay_target = std::chrono::seconds{10}}};
  std::atomic<std::uint64_t> not_ok{0};
  const double cpu_since = process_cpu_ns();
  for (auto _ : state) {
    std::latch done{kBatch};
    produce(producers, kBatch, [&](std::int64_t) {
      rt.submit({.kind = "noop", .budget = budget},
                [](sandglass::JobContext& ctx) { ctx.checkpoint(); },
                [&done, &not_ok](const sandglass::Outcome& o) {
                  if (o.reason != sandglass::Reason::ok) {
                    not_ok.fetch_add(1, std::memory_order_relaxed);
                  }
                  done.count_down();
                });
    });
    done.wait();
  }
  report_cpu_per_job(state, cpu_since);
  // How far the producers ran ahead of the workers (a deep queue: the workers set the rate).
  const sandglass::RuntimeStats stats = rt.stats();
  state.counters["peak_queued"] = static_cast<double>(stats.peak_queued);
  // How often a worker stood by behind the no-op jobs (RuntimeOptions::tiny_job), per batch.
  state.counters["stand_bys"] =
      static_cast<double>(stats.stand_bys) / static_cast<double>(state.iterations());
  rt.shutdown(1s);
  state.SetItemsProcessed(state.iterations() * kBatch);
  if (const std::uint64_t bad = not_ok.load(); bad != 0) {
    state.SkipWithError(("jobs without outcome ok: " + std::to_string(bad)).c_str());
  }
}
void BM_SandglassRuntime(benchmark::State& state) { sandglass_runtime(state, 1); }
void BM_SandglassRuntime4Producers(benchmark::State& state) { sandglass_runtime(state, kProducers); }
BENCHMARK(BM_SandglassRuntime)->UseRealTime()->MinTime(1.0)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AsioThreadPool4Producers)->UseRealTime()->MinTime(1.0)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MutexDequePool4Producers)->UseRealTime()->MinTime(1.0)->Unit(benchmark::kMillisecond);
#if SANDGLASS_BENCH_HAVE_TBB
BENCHMARK(BM_TbbArena4Producers)->UseRealTime()->MinTime(1.0)->Unit(benchmark::kMillisecond);
#endif
BENCHMARK(BM_SandglassRuntime4Producers)->UseRealTime()->MinTime(1.0)->Unit(benchmark::kMillisecond);

// Median and 99th percentile of latency samples, as counters in microseconds.
// `prefix` names the counters: prefix + "p50_us", prefix + "p99_us".
void report_percentiles(benchmark::State& state, std::vector<double>& samples_us,
                        const std::string& prefix = "");

// Low load: one job at a time, and the workers idle (asleep) before each.
void BM_SubmitToStart(benchmark::State& state) {
  const bool runtime = state.range(0) == 1;
  std::optional<boost::asio::thread_pool> pool;
  std::optional<sandglass::Runtime> rt;
  if (runtime) {
    rt.emplace(sandglass::RuntimeOptions{.workers = kWorkers, .capacity = 64});
  } else {
    pool.emplace(kWorkers);
  }
  std::vector<double> samples_us;
  std::vector<double> submit_us;  // the submit call alone, its wake-up of a worker included
  for (auto _ : state) {
    std::this_thread::sleep_for(200us);  // the workers go back to sleep
    std::atomic<sandglass::TimePoint> started{sandglass::TimePoint{}};
    std::latch done{1};
    const sandglass::TimePoint t0 = sandglass::Clock::now();
    if (runtime) {
      rt->submit({.kind = "noop", .budget = 10s}, [&](sandglass::JobContext&) {
        // Pairs with the acquire load below (after the latch, which orders it anyway).
        started.store(sandglass::Clock::now(), std::memory_order_release);
        done.count_down();
      });
    } else {
      boost::asio::post(*pool, [&] {
        started.store(sandglass::Clock::now(), std::memory_order_release);
        done.count_down();
      });
    }
    const sandglass::TimePoint submitted = sandglass::Clock::now();
    done.wait();
    submit_us.push_back(std::chrono::duration<double>(submitted - t0).count() * 1e6);
    const std::chrono::duration<double> latency = started.load(std::memory_order_acquire) - t0;
    state.SetIterationTime(latency.count());
    samples_us.push_back(latency.count() * 1e6);
  }
  report_percentiles(state, samples_us);
  report_percentiles(state, submit_us, "submit_");
  state.SetLabel(runtime ? "sandglass::Runtime" : "asio::thread_pool");
  if (rt) rt->shutdown(1s);
  if (pool) pool->join();
}
BENCHMARK(BM_SubmitToStart)->Arg(0)->Arg(1)->UseManualTime()->Iterations(3000)->Unit(benchmark::kMicrosecond);

// Heap bytes per queued job: a busy worker, 10,000 jobs queued behind it.
void BM_BytesPerQueuedJob(benchmark::State& state) {
  constexpr std::int64_t kQueued = 10'000;
  double per_job = 0;
  for (auto _ : state) {
    sandglass::Runtime rt{{.workers = 1, .capacity = kQueued + 16}};
    std::latch running{1};
    std::latch release{1};
    rt.submit({.kind = "block", .budget = 60s}, [&](sandglass::JobContext&) {
      running.count_down();
      release.wait();
    });
    running.wait();
    std::vector<sandglass::JobHandle> handles;
    handles.reserve(kQueued);
    tl_live_bytes = 0;
    tl_counting = true;
    for (std::int64_t i = 0; i < kQueued; ++i) {
      handles.push_back(rt.submit({.kind = "noop", .budget = 60s}, [](sandglass::JobContext&) {}));
    }
    tl_counting = false;
    per_job = static_cast<double>(tl_live_bytes) / static_cast<double>(kQueued);
    if (rt.stats().queued != static_cast<std::size_t>(kQueued)) state.SkipWithError("jobs were not queued");
    release.count_down();
    rt.shutdown(10s);
  }
  state.counters["bytes_per_job"] = per_job;
}
BENCHMARK(BM_BytesPerQueuedJob)->Iterations(1)->Unit(benchmark::kMillisecond);

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

// Admission alone: a queue holding 256 jobs of a kind estimated at 2 ms, 8 workers.
void BM_AdmissionDecision(benchmark::State& state) {
  const bool implausible = state.range(0) == 1;
  sandglass::DeadlineQueue queue{{.capacity = 4096, .workers = 8}};
  const sandglass::TimePoint now = sandglass::Clock::now();
  std::vector<sandglass::QueueItem> queued(256);
  for (std::size_t i = 0; i < queued.size(); ++i) {
    queued[i].deadline = sandglass::Deadline::after(10s + std::chrono::microseconds{i}, now);
    queued[i].estimate = 2ms;
    if (!queue.admit(queued[i], now).admitted()) state.SkipWithError("set-up admission failed");
  }
  sandglass::QueueItem newcomer;
  // 256 x 2 ms / 8 workers = 64 ms of work ahead: 1 s fits, 50 ms does not.
  newcomer.deadline = sandglass::Deadline::after(implausible ? 50ms : 1s, now);
  newcomer.estimate = 2ms;
  for (auto _ : state) {
    const sandglass::Admission a = queue.admit(newcomer, now);
    benchmark::DoNotOptimize(a);
    if (a.admitted()) queue.remove(newcomer);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(implausible ? "deadline_implausible" : "admitted+removed");
  for (auto& item : queued) queue.remove(item);
}
BENCHMARK(BM_AdmissionDecision)->Arg(0)->Arg(1);

// A whole rejection through the Runtime: from submit until the outcome callback ran.
void BM_RejectionLatency(benchmark::State& state) {
  const bool implausible = state.range(0) == 1;
  // Samples kept for an hour: the one that teaches "slow" must not age out during the run.
  sandglass::Runtime rt{{.workers = 1, .capacity = 1, .estimate_max_age = std::chrono::hours{1}}};
  // Teach the estimator that "slow" takes about 10 ms.
  rt.submit({.kind = "slow", .budget = 1s}, [](sandglass::JobContext& ctx) { ctx.sleep_for(10ms); }).wait();
  // Occupy the worker, then fill the queue.
  std::latch running{1};
  auto blocker = rt.submit({.kind = "block", .budget = 60s}, [&running](sandglass::JobContext& ctx) {
    running.count_down();
    ctx.sleep_for(60s);
  });
  running.wait();
  auto filler = rt.submit({.kind = "block", .budget = 60s}, [](sandglass::JobContext&) {});
  const sandglass::Reason expected =
      implausible ? sandglass::Reason::deadline_implausible : sandglass::Reason::queue_full;
  sandglass::JobSpec spec{.kind = implausible ? "slow" : "noop", .budget = implausible ? 5ms : 10s};
  std::uint64_t wrong = 0;
  for (auto _ : state) {
    rt.submit(spec, [](sandglass::JobContext&) {},
              [&wrong, expected](const sandglass::Outcome& o) { wrong += o.reason != expected; });
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(std::string{sandglass::to_string(expected)});
  blocker.cancel();
  rt.shutdown(1s);
  if (wrong != 0) state.SkipWithError(("unexpected outcomes: " + std::to_string(wrong)).c_str());
}
BENCHMARK(BM_RejectionLatency)->Arg(0)->Arg(1)->UseRealTime();

// Median and 99th percentile of latency samples, as counters in microseconds: on a noisy
// machine the mean (the reported time) is dominated by a few preempted iterations.
void report_percentiles(benchmark::State& state, std::vector<double>& samples_us,
                        const std::string& prefix) {
  if (samples_us.empty()) return;
  std::sort(samples_us.begin(), samples_us.end());
  auto at = [&](double q) {
    return samples_us[std::min(samples_us.size() - 1, static_cast<std::size_t>(q * static_cast<double>(samples_us.size())))];
  };
  state.counters[prefix + "p50_us"] = at(0.50);
  state.counters[prefix + "p99_us"] = at(0.99);
}

// A handler that waits for cancellation: polling a checkpoint, or blocked in sleep_for. It
// stores when it noticed into `seen`.
void wait_for_cancellation(sandglass::JobContext& ctx, bool sleeping, std::latch& started,
                           std::atomic<sandglass::TimePoint>& seen) {
  started.count_down();
  try {
    if (sleeping) {
      ctx.sleep_for(60s);
    } else {
      for (;;) ctx.checkpoint();
    }
  } catch (const sandglass::Cancelled&) {
    // Pairs with the acquire loads of the benchmark thread.
    seen.store(sandglass::Clock::now(), std::memory_order_release);
    throw;
  }
}

void BM_CancelToObserved(benchmark::State& state) {
  const bool sleeping = state.range(0) == 1;
  sandglass::Runtime rt{{.workers = 1, .capacity = 16}};
  double to_outcome_us = 0;
  std::vector<double> samples_us;
  for (auto _ : state) {
    std::latch started{1};
    std::atomic<sandglass::TimePoint> seen{sandglass::TimePoint{}};
    auto job = rt.submit({.kind = "wait", .budget = 60s}, [&](sandglass::JobContext& ctx) {
      wait_for_cancellation(ctx, sleeping, started, seen);
    });
    started.wait();
    std::this_thread::sleep_for(50us);  // let it reach its wait
    const sandglass::TimePoint t0 = sandglass::Clock::now();
    job.cancel();
    job.wait();  // blocks rather than spins: on 2 cores a spinning waiter delays the handler
    const sandglass::TimePoint outcome = sandglass::Clock::now();
    const sandglass::TimePoint observed = seen.load(std::memory_order_acquire);
    state.SetIterationTime(std::chrono::duration<double>{observed - t0}.count());
    samples_us.push_back(std::chrono::duration<double, std::micro>{observed - t0}.count());
    to_outcome_us += std::chrono::duration<double, std::micro>{outcome - t0}.count();
  }
  state.counters["to_outcome_us"] = to_outcome_us / static_cast<double>(state.iterations());
  report_percentiles(state, samples_us);
  state.SetLabel(sleeping ? "sleep_for" : "checkpoint loop");
  rt.shutdown(1s);
}
BENCHMARK(BM_CancelToObserved)->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMicrosecond);

void BM_DeadlineToObserved(benchmark::State& state) {
  const bool sleeping = state.range(0) == 1;
  sandglass::Runtime rt{{.workers = 1, .capacity = 64}};
  auto noop = [](sandglass::JobContext&) {};
  std::vector<double> samples_us;
  std::int64_t retries = 0;
  for (auto _ : state) {
    // On a busy machine the worker may not start the job before its deadline (the outcome is
    // then expired_in_queue): try again, up to a limit.
    for (int attempt = 0;; ++attempt) {
      // Runs cut by their deadline teach the estimator that "wait" takes its whole budget, and
      // admission would then reject the next as implausible: short runs keep its p90 short.
      for (int i = 0; i < 16; ++i) rt.submit({.kind = "wait", .budget = 1s}, noop).wait();
      std::latch started{1};
      std::atomic<sandglass::TimePoint> seen{sandglass::TimePoint{}};
      sandglass::Deadline deadline;
      auto job = rt.submit({.kind = "wait", .budget = 5ms}, [&](sandglass::JobContext& ctx) {
        deadline = ctx.deadline();  // read after wait(), which orders it
        wait_for_cancellation(ctx, sleeping, started, seen);
      });
      const sandglass::Outcome o = job.wait();
      if (o.reason == sandglass::Reason::cancelled_while_running) {
        const sandglass::TimePoint observed = seen.load(std::memory_order_acquire);
        state.SetIterationTime(std::chrono::duration<double>{observed - deadline.time_point()}.count());
        samples_us.push_back(std::chrono::duration<double, std::micro>{observed - deadline.time_point()}.count());
        break;
      }
      ++retries;
      if (attempt == 20) {
        state.SkipWithError(("unexpected outcome: " + std::string{sandglass::to_string(o.reason)}).c_str());
        break;
      }
    }
  }
  report_percentiles(state, samples_us);
  state.counters["retries"] = static_cast<double>(retries);
  state.SetLabel(sleeping ? "sleep_for" : "checkpoint loop");
  rt.shutdown(1s);
}
BENCHMARK(BM_DeadlineToObserved)->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
