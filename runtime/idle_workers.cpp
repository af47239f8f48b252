#include "runtime/idle_workers.hpp"

namespace sandglass::detail {

IdleWorkers::IdleWorkers(std::size_t workers)
    : marks_((workers + 63) / 64), wake_{std::make_unique<Wake[]>(workers)}, workers_{workers} {}

void IdleWorkers::prepare(std::size_t worker) noexcept {
  wake_[worker].word.store(0, std::memory_order_relaxed);
  // Pairs with the seq_cst load in wake_one(): after this, a waker that made work visible
  // sees the mark, or this worker's next look sees the work.
  marks_[worker / 64].fetch_or(std::uint64_t{1} << (worker % 64), std::memory_order_seq_cst);
}

void IdleWorkers::withdraw(std::size_t worker) noexcept {
  marks_[worker / 64].fetch_and(~(std::uint64_t{1} << (worker % 64)), std::memory_order_seq_cst);
}

void IdleWorkers::sleep(std::size_t worker) noexcept {
  // Acquire: pairs with the release store in wake_one(), so the claimer's work is visible.
  wake_[worker].word.wait(0, std::memory_order_acquire);
}

bool IdleWorkers::wake_one() noexcept {
  for (std::size_t i = 0; i < marks_.size(); ++i) {
    std::uint64_t marks = marks_[i].load(std::memory_order_seq_cst);
    while (marks != 0) {
      const std::uint64_t bit = marks & (~marks + 1);
      // Claims the worker: only one waker clears its mark.
      marks = marks_[i].fetch_and(~bit, std::memory_order_seq_cst);
      if ((marks & bit) == 0) continue;  // another waker, or the worker itself, was first
      const std::size_t worker = i * 64 + static_cast<std::size_t>(__builtin_ctzll(bit));
      // Release: pairs with the acquire wait in sleep().
      wake_[worker].word.store(1, std::memory_order_release);
      wake_[worker].word.notify_one();
      return true;
    }
  }
  return false;
}

void IdleWorkers::wake_all() noexcept {
  for (auto& marks : marks_) marks.store(0, std::memory_order_seq_cst);
  for (std::size_t w = 0; w < workers_; ++w) {
    wake_[w].word.store(1, std::memory_order_release);  // pairs with sleep()
    wake_[w].word.notify_one();
  }
}

bool IdleWorkers::any() const noexcept {
  for (const auto& marks : marks_) {
    if (marks.load(std::memory_order_seq_cst) != 0) return true;
  }
  return false;
}

}  // namespace sandglass::detail
