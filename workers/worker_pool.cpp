#include "workers/worker_pool.hpp"

#include "workers/job_runner.hpp"

#include <string>

#if defined(__linux__)
#include <pthread.h>
#endif

namespace sandglass::detail {

WorkerPool::WorkerPool(std::size_t workers, JobSource& source, const BudgetPolicy& policy) {
  threads_.reserve(workers);
  for (std::size_t i = 0; i < workers; ++i) {
    threads_.emplace_back([&source, &policy, i] {
#if defined(__linux__)
      // For ps, top and debuggers: "sg-worker-3" (at most 15 characters).
      const std::string name = "sg-worker-" + std::to_string(i % 10000);
      pthread_setname_np(pthread_self(), name.c_str());
#endif
      Job* job = source.next_job(i, nullptr, Outcome{});
      while (job != nullptr) {
        Outcome outcome = run_job(*job, policy);
        job = source.next_job(i, job, std::move(outcome));
      }
    });
  }
}

void WorkerPool::join() {
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

}  // namespace sandglass::detail
