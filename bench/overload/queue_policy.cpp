// bounded-fifo and drop-expired: a mutex, a condition variable and a deque, served by plain
// threads. bounded-fifo rejects when the deque holds `capacity` jobs; drop-expired takes all
// and drops, when a worker takes it, a job whose deadline already passed. Neither cancels a
// job that runs.
#include "policy.hpp"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace sandglass::bench {
namespace {

class QueuePolicy final : public Policy {
 public:
  QueuePolicy(const PolicyOptions& options, bool bounded, bool drop_expired)
      : body_{options.body}, capacity_{bounded ? options.capacity : 0}, drop_expired_{drop_expired} {
    workers_.reserve(options.workers);
    for (std::size_t w = 0; w < options.workers; ++w) {
      workers_.emplace_back([this] { work(); });
    }
  }

  ~QueuePolicy() override {
    {
      std::lock_guard lock{mu_};
      stopping_ = true;
    }
    ready_.notify_all();
    workers_.clear();  // joins; workers empty the deque first
  }

  void submit(Recorder& rec, std::size_t i) override {
    {
      std::unique_lock lock{mu_};
      if (capacity_ != 0 && queue_.size() >= capacity_) {
        lock.unlock();
        rec.rejected(i, Clock::now(), Reason::queue_full);
        return;
      }
      queue_.push_back({&rec, i});
      note_queued();
    }
    ready_.notify_one();
  }

  void abandon() override {
    std::lock_guard lock{mu_};
    abandoned_ = true;
  }

 private:
  struct Task {
    Recorder* rec;
    std::size_t index;
  };

  void work() {
    std::unique_lock lock{mu_};
    for (;;) {
      ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left
      const Task task = queue_.front();
      queue_.pop_front();
      note_left();
      const bool abandoned = abandoned_;
      lock.unlock();
      run(task, abandoned);
      lock.lock();
    }
  }

  void run(const Task& task, bool abandoned) {
    Recorder& rec = *task.rec;
    const TimePoint start = Clock::now();
    if (abandoned || (drop_expired_ && start >= rec.deadline(task.index))) {
      rec.expired(task.index, start);
      return;
    }
    run_plain_body(body_, rec.arrival(task.index).service);
    const TimePoint end = Clock::now();
    rec.completed(task.index, end, end - start);
  }

  const Body body_;
  const std::size_t capacity_;  // zero: unbounded
  const bool drop_expired_;
  std::mutex mu_;
  std::condition_variable ready_;   // a task was queued, or stopping_ was set
  std::deque<Task> queue_;          // guarded by mu_
  bool abandoned_ = false;          // guarded by mu_
  bool stopping_ = false;           // guarded by mu_
  std::vector<std::jthread> workers_;  // last: joined before the members above go
};

}  // namespace

std::unique_ptr<Policy> make_queue_policy(const PolicyOptions& options, bool bounded,
                                          bool drop_expired) {
  return std::make_unique<QueuePolicy>(options, bounded, drop_expired);
}

}  // namespace sandglass::bench
