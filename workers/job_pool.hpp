// job_pool.hpp (private) — `JobPool`, where job records come from: freed records are kept and
// handed out again instead of going back to malloc.
//
//   void* block = JobPool::allocate();   // then: ::new (block) Job (see Job::make)
//
// A record is made on a submitting thread and usually freed on a worker. Through malloc that
// is a cross-thread free into the submitter's arena, and a fresh submitter thread's arena
// grows and trims its heap again and again (page faults: a third of the time with four new
// producer threads in the hand-off bench). Here each thread takes blocks from a batch it
// holds and collects what it frees into another (no atomics per record); a full batch (256)
// goes to a process-wide stack of batches, and a thread with nothing left takes one batch
// from it: a mutex once per 256 records. A thread's batches go back to the stack when the
// thread ends, and the stack is released to malloc when the last Runtime is destroyed
// (`release_unused`), so the blocks kept are bounded by the peak number of live jobs while
// some runtime exists. Under AddressSanitizer there is no pool (a use after free stays
// visible).
//
// Thread safety: every function may be called from any thread.
#pragma once

#include <cstddef>
#include <new>

namespace sandglass::detail {

class JobPool {
 public:
  // The size of a block: a job record (its reference count is inside it).
  static std::size_t block_bytes() noexcept;
  // A block of block_bytes(), aligned for max_align_t (operator new's alignment). Throws
  // std::bad_alloc.
  static void* allocate();
  static void deallocate(void* block) noexcept;
  // Frees the blocks in the shared stack and in this thread's cache (other threads' caches
  // stay). For the destruction of the last runtime.
  static void release_unused() noexcept;
};

}  // namespace sandglass::detail
