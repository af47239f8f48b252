#include "workers/worker_pool.hpp"

#include "workers/job_runner.hpp"

namespace sandglass::detail {

WorkerPool::WorkerPool(std::size_t workers, JobSource& source, const BudgetPolicy& policy) {
  threads_.reserve(workers);
  for (std::size_t i = 0; i < workers; ++i) {
    threads_.emplace_back([&source, &policy, i] {
      std::shared_ptr<Job> job = source.next_job(i, nullptr, Outcome{});
      while (job) {
        Outcome outcome = run_job(*job, policy);
        job = source.next_job(i, std::move(job), std::move(outcome));
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
