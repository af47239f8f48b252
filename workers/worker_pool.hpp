// worker_pool.hpp (private) — `WorkerPool`, a fixed set of threads that run jobs from a
// `JobSource`, and the `JobSource` interface the runtime implements.
//
// Thread safety: the pool's constructor starts the threads; `join` and the destructor must not
// race with each other.
#pragma once

#include <sandglass/budget_policy.hpp>
#include <sandglass/outcome.hpp>

#include "workers/job.hpp"

#include <cstddef>
#include <memory>
#include <thread>
#include <vector>

namespace sandglass::detail {

class JobSource {
 public:
  virtual ~JobSource() = default;
  // Records the outcome of `finished` (the job this worker ran last; null on a worker's first
  // call) and publishes it, then blocks until a job may start and returns it marked running
  // on `worker` (the caller's index in the pool, from 0), or returns nullptr when the pool
  // should stop. Called by every worker thread. The worker holds no reference of its own: the
  // source keeps a returned job alive until the worker hands it back as `finished`.
  virtual Job* next_job(std::size_t worker, Job* finished, Outcome&& outcome) noexcept = 0;
  // Records and publishes the outcome of a job that ran without a worker thread (an awaitable
  // one), on whichever thread it ended; frees its run slot.
  virtual void finish_detached(JobRef job, Outcome&& outcome) noexcept = 0;
};

class WorkerPool {
 public:
  // `source` and `policy` must outlive the pool.
  WorkerPool(std::size_t workers, JobSource& source, const BudgetPolicy& policy);
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;
  ~WorkerPool() { join(); }

  // Blocks until every worker has returned (that is, until `next_job` returned nullptr to
  // each of them).
  void join();
  std::size_t size() const noexcept { return threads_.size(); }

 private:
  std::vector<std::thread> threads_;
};

}  // namespace sandglass::detail
