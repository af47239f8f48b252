// idle_workers.hpp (private) — `IdleWorkers`: which worker threads sleep, and how to wake
// one without the runtime's lock (a submitter that admitted a job lock-free has no lock).
//
//   idle.prepare(w);                    // under the runtime's lock, found nothing to do
//   unlock; if (work appeared meanwhile) idle.withdraw(w); else idle.sleep(w);
//   ...
//   idle.wake_one();                    // anyone, after making work visible
//
// The protocol: a worker marks itself idle (`prepare`) while it still holds the lock under
// which it saw no work, and looks once more at what lock-free submitters publish (the inbox)
// after releasing it. A waker makes its work visible first and then claims an idle worker.
// Both sides are seq_cst, so either the worker sees the work, or the waker sees the mark; a
// claimed worker's wake word is set before it is notified, so a wake-up is never lost (a
// futex wait on the word returns at once if it changed). Claiming clears the mark, so two
// wakers never wake the same sleeper for two jobs.
//
// Which one: wake_one prefers a worker that went to sleep on the caller's core (its cache is
// there, and the kernel tends to leave it there). On the 2-core VM 96-98 % of wake-ups at low
// load ran the handler on the submitter's core in 4.7-5.3 us; the rest crossed to the idle
// core, where the VM wakes a halted virtual CPU: 28-70 us, the whole of the p99. With the
// preference, over 9 alternated rounds, the share that stayed was 0.975-0.998 (mean 0.989)
// against 0.953-0.988 (0.980) without, and the p99 fell below 25 us in 3 rounds of 9 (without:
// none, measured with sandglass-handoff-bench).
//
// Standing by (RuntimeCore, "Tiny jobs"): a worker that is not needed while another drains a
// run of tiny jobs sleeps unmarked, so that submitters never wake it, for at most a while:
//
//   idle.prepare_stand_by(w);           // under the runtime's lock, with w recorded as standing by
//   unlock; bool woken = idle.stand_by(w, at_most);
//   ...
//   idle.wake_standing_by(w);           // a worker that chose w under the lock, after unlocking
//
// Thread safety: every member function may be called concurrently; `prepare`, `withdraw`,
// `sleep`, `prepare_stand_by` and `stand_by` only by the worker named.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace sandglass::detail {

class IdleWorkers {
 public:
  explicit IdleWorkers(std::size_t workers);

  // Marks `worker` idle and ready to be woken; then look for work once more, and `withdraw`
  // or `sleep`.
  void prepare(std::size_t worker) noexcept;
  // Takes back the mark if nobody claimed it (a claim already made only causes one spurious
  // return from a later `sleep`).
  void withdraw(std::size_t worker) noexcept;
  // Blocks until a waker claims `worker` (at once if one did since `prepare`).
  void sleep(std::size_t worker) noexcept;
  // Claims one idle worker and wakes it, one that went to sleep on this core if there is one.
  // True if there was one.
  bool wake_one() noexcept;
  // Wakes every worker, idle, standing by or about to be (for stopping).
  void wake_all() noexcept;
  // True if some worker is marked idle.
  bool any() const noexcept;
  // True if `worker` is marked idle.
  bool marked(std::size_t worker) const noexcept;

  // Clears `worker`'s wake word, before it becomes known as standing by.
  void prepare_stand_by(std::size_t worker) noexcept;
  // Blocks, unmarked, until wake_standing_by (or wake_all) or for at most `at_most`. True if
  // woken (also for a wake-up left from an earlier claim), false when the time ran out.
  bool stand_by(std::size_t worker, std::chrono::nanoseconds at_most) noexcept;
  // Wakes `worker`, which stands by.
  void wake_standing_by(std::size_t worker) noexcept;

 private:
  struct alignas(64) Wake {
    std::atomic<std::uint32_t> word{0};  // 1: claimed (wake up); 0: asleep or about to be
    std::atomic<int> cpu{-1};            // the core it went to sleep on
  };
  // Claims and wakes the first idle worker w with wanted(w).
  template <typename Wanted>
  bool claim_and_wake(Wanted wanted) noexcept;
  std::vector<std::atomic<std::uint64_t>> marks_;  // bit w % 64 of word w / 64: idle
  std::unique_ptr<Wake[]> wake_;
  std::size_t workers_;
};

}  // namespace sandglass::detail
