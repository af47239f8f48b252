// fifo: what a plain boost::asio::thread_pool gives you. Every job is posted and runs in
// arrival order, however late it already is.
#include "policy.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

namespace sandglass::bench {
namespace {

class FifoPolicy final : public Policy {
 public:
  explicit FifoPolicy(const PolicyOptions& options)
      : body_{options.body}, pool_{options.workers} {}
  ~FifoPolicy() override { pool_.join(); }

  void submit(Recorder& rec, std::size_t i) override {
    note_queued();
    boost::asio::post(pool_, [this, &rec, i] { run(rec, i); });
  }

  void abandon() override { abandoned_.store(true, std::memory_order_relaxed); }

 private:
  void run(Recorder& rec, std::size_t i) {
    note_left();
    const TimePoint start = Clock::now();
    if (abandoned_.load(std::memory_order_relaxed)) {
      rec.expired(i, start);
      return;
    }
    run_plain_body(body_, rec.arrival(i).service);
    const TimePoint end = Clock::now();
    rec.completed(i, end, end - start);
  }

  const Body body_;
  std::atomic<bool> abandoned_{false};
  boost::asio::thread_pool pool_;  // last: its threads use the members above
};

}  // namespace

std::unique_ptr<Policy> make_fifo_policy(const PolicyOptions& options) {
  return std::make_unique<FifoPolicy>(options);
}

}  // namespace sandglass::bench
