// job_pool.hpp (private) — `JobPool`, where job records come from: freed records are kept and
// handed out again instead of going back to malloc.
//
//   void* block = JobPool::allocate(JobPool::Size::plain);   // then ::new (block) Job (Job::make)
//
// A record is made on a submitting thread and usually freed on a worker. Through malloc that
// is a cross-thread free into the submitter's arena, and a fresh submitter thread's arena
// grows and trims its heap again and again (page faults: a third of the time with four new
// producer threads in the hand-off bench). Here each thread takes blocks from a batch it
// holds and collects what it frees into another (no atomics per record); a full batch (256)
// goes to a process-wide stack of batches (one per block size), and a thread with nothing left
// takes one batch from it: a mutex once per 256 records. A thread's batches go back to the stack when the
// thread ends, and the stack is released to malloc when the last Runtime is destroyed
// (`release_unused`), so the blocks kept are bounded by the peak number of live jobs while
// some runtime exists. Under AddressSanitizer there is no pool (a use after free stays
// visible).
//
// Thread safety: every function may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>

namespace sandglass::detail {

class JobPool {
 public:
  // Two block sizes: a job record, and a record with an outcome callback after it
  // (JobWithCallback). Each has its own batches.
  enum class Size : std::uint8_t { plain, with_callback };
  static std::size_t block_bytes(Size size) noexcept;
  // A block of block_bytes(size), aligned for max_align_t (operator new's alignment). Throws
  // std::bad_alloc.
  static void* allocate(Size size);
  // `block` came from allocate(size).
  static void deallocate(void* block, Size size) noexcept;
  // Frees the blocks in the shared stacks and in this thread's caches (other threads' caches
  // stay). For the destruction of the last runtime.
  static void release_unused() noexcept;
};

}  // namespace sandglass::detail
