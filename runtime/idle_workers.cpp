#include "runtime/idle_workers.hpp"

#include <thread>

#if defined(__linux__)
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#endif

namespace sandglass::detail {
namespace {

// The wake word is a private futex on Linux, waited on and woken by raw system calls.
// std::atomic::wait would do the same in principle, but libstdc++ 12 never defines
// _GLIBCXX_HAVE_LINUX_FUTEX_PRIVATE, so its wait and notify use a shared futex: each wake-up
// makes the kernel look the word's page up (get_futex_key, gup_fast_fallback in `perf`). It
// also spins with sched_yield before it sleeps and keeps a global waiter count, and it has no
// timed wait (stand_by needs one). Elsewhere, sleep() waits through std::atomic and
// stand_by() polls.
#if defined(__linux__)
std::uint32_t* futex_word(std::atomic<std::uint32_t>& word) noexcept {
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
  return reinterpret_cast<std::uint32_t*>(&word);
}

// Sleeps while `word` is 0, for at most `timeout` (none: no limit). Returns at once if the word
// is no longer 0, and may return spuriously: the caller looks again.
void futex_wait(std::atomic<std::uint32_t>& word, const timespec* timeout) noexcept {
  syscall(SYS_futex, futex_word(word), FUTEX_WAIT_PRIVATE, 0, timeout, nullptr, 0);
}
#endif

// Wakes the thread that waits on `word` in sleep() or stand_by().
void wake_waiter(std::atomic<std::uint32_t>& word) noexcept {
#if defined(__linux__)
  syscall(SYS_futex, futex_word(word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
#else
  word.notify_one();
#endif
}

// The caller's core; -1 where that is not known. glibc reads it from rseq: no system call.
int current_cpu() noexcept {
#if defined(__linux__)
  return sched_getcpu();
#else
  return -1;
#endif
}

}  // namespace

IdleWorkers::IdleWorkers(std::size_t workers)
    : marks_((workers + 63) / 64), wake_{std::make_unique<Wake[]>(workers)}, workers_{workers} {}

void IdleWorkers::prepare(std::size_t worker) noexcept {
  wake_[worker].word.store(0, std::memory_order_relaxed);
  wake_[worker].cpu.store(current_cpu(), std::memory_order_relaxed);
  // Pairs with the seq_cst load in wake_one(): after this, a waker that made work visible
  // sees the mark, or this worker's next look sees the work.
  marks_[worker / 64].fetch_or(std::uint64_t{1} << (worker % 64), std::memory_order_seq_cst);
}

void IdleWorkers::withdraw(std::size_t worker) noexcept {
  marks_[worker / 64].fetch_and(~(std::uint64_t{1} << (worker % 64)), std::memory_order_seq_cst);
}

void IdleWorkers::sleep(std::size_t worker) noexcept {
  std::atomic<std::uint32_t>& word = wake_[worker].word;
  // Acquire: pairs with the release store in wake_one(), so the claimer's work is visible.
#if defined(__linux__)
  while (word.load(std::memory_order_acquire) == 0) futex_wait(word, nullptr);
#else
  word.wait(0, std::memory_order_acquire);
#endif
}

bool IdleWorkers::wake_one() noexcept {
  const int here = current_cpu();
  if (here >= 0 && claim_and_wake([&](std::size_t w) {
        return wake_[w].cpu.load(std::memory_order_relaxed) == here;
      })) {
    return true;
  }
  return claim_and_wake([](std::size_t) { return true; });
}

template <typename Wanted>
bool IdleWorkers::claim_and_wake(Wanted wanted) noexcept {
  for (std::size_t i = 0; i < marks_.size(); ++i) {
    std::uint64_t marks = marks_[i].load(std::memory_order_seq_cst);
    while (marks != 0) {
      const std::uint64_t bit = marks & (~marks + 1);
      marks &= ~bit;
      const std::size_t worker = i * 64 + static_cast<std::size_t>(__builtin_ctzll(bit));
      if (!wanted(worker)) continue;
      // Claims the worker: only one waker clears its mark.
      if ((marks_[i].fetch_and(~bit, std::memory_order_seq_cst) & bit) == 0) continue;
      // Release: pairs with the acquire wait in sleep().
      wake_[worker].word.store(1, std::memory_order_release);
      wake_waiter(wake_[worker].word);
      return true;
    }
  }
  return false;
}

void IdleWorkers::wake_all() noexcept {
  for (auto& marks : marks_) marks.store(0, std::memory_order_seq_cst);
  for (std::size_t w = 0; w < workers_; ++w) {
    wake_[w].word.store(1, std::memory_order_release);  // pairs with sleep() and stand_by()
    wake_waiter(wake_[w].word);
  }
}

bool IdleWorkers::any() const noexcept {
  for (const auto& marks : marks_) {
    if (marks.load(std::memory_order_seq_cst) != 0) return true;
  }
  return false;
}

bool IdleWorkers::marked(std::size_t worker) const noexcept {
  return ((marks_[worker / 64].load(std::memory_order_seq_cst) >> (worker % 64)) & 1) != 0;
}

void IdleWorkers::prepare_stand_by(std::size_t worker) noexcept {
  wake_[worker].word.store(0, std::memory_order_relaxed);
}

bool IdleWorkers::stand_by(std::size_t worker, std::chrono::nanoseconds at_most) noexcept {
  std::atomic<std::uint32_t>& word = wake_[worker].word;
  const auto until = std::chrono::steady_clock::now() + at_most;
  // Acquire: pairs with the release store of the waker.
  while (word.load(std::memory_order_acquire) == 0) {
    const auto left = until - std::chrono::steady_clock::now();
    if (left <= std::chrono::nanoseconds::zero()) return false;
#if defined(__linux__)
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    const timespec timeout{.tv_sec = static_cast<time_t>(ns / 1'000'000'000),
                           .tv_nsec = static_cast<long>(ns % 1'000'000'000)};
    futex_wait(word, &timeout);  // at once if the wake-up came first
#else
    std::this_thread::sleep_for(std::min<std::chrono::nanoseconds>(left, std::chrono::microseconds{20}));
#endif
  }
  return true;
}

void IdleWorkers::wake_standing_by(std::size_t worker) noexcept {
  wake_[worker].word.store(1, std::memory_order_release);  // pairs with stand_by()
  wake_waiter(wake_[worker].word);
}

}  // namespace sandglass::detail
