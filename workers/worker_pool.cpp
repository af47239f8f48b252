#include "workers/worker_pool.hpp"

#include "workers/job_runner.hpp"

namespace sandglass::detail {

WorkerPool::WorkerPool(std::size_t workers, JobSource& source, const BudgetPolicy& policy) {
  threads_.reserve(workers);
  for (std::size_t i = 0; i < workers; ++i) {
    threads_.emplace_back([&source, &policy] {
      while (std::shared_ptr<Job> job = source.next_job()) {
        source.job_finished(job, run_job(*job, policy));
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
