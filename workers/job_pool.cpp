#include "workers/job_pool.hpp"

#include "workers/job.hpp"

#include <memory>
#include <mutex>

namespace sandglass::detail {
namespace {

struct FreeBlock {
  FreeBlock* next;        // in its batch
  FreeBlock* next_batch;  // the first block of a batch: the batch below it in the shared stack
};

// The record, and not a byte more: every byte is a byte per queued job (malloc rounds a block up
// to 16k + 8 usable bytes). The second size holds an outcome callback after the record.
constexpr std::size_t kBlockBytes[2] = {sizeof(Job), sizeof(JobWithCallback)};
// Blocks per batch: a thread that frees this many more than it makes hands them over.
constexpr std::size_t kBatch = 256;

std::size_t index_of(JobPool::Size size) noexcept { return static_cast<std::size_t>(size); }

// Batches of kBatch blocks of one size. Taken once per kBatch records, so the lock is nowhere
// near the per-job path; a batch is popped whole, so one thread never takes more than it needs.
constinit std::mutex g_mu;
constinit FreeBlock* g_batches[2] = {nullptr, nullptr};  // guarded by g_mu

void push_batch(std::size_t size, FreeBlock* head) noexcept {
  std::lock_guard lock{g_mu};
  head->next_batch = g_batches[size];
  g_batches[size] = head;
}

FreeBlock* pop_batch(std::size_t size) noexcept {
  std::lock_guard lock{g_mu};
  FreeBlock* batch = g_batches[size];
  if (batch != nullptr) g_batches[size] = batch->next_batch;
  return batch;
}

void free_chain(FreeBlock* head) noexcept {
  while (head != nullptr) {
    FreeBlock* next = head->next;
    ::operator delete(static_cast<void*>(head));
    head = next;
  }
}

// A thread's blocks of one size: the batch it takes from, and the one it fills with what it
// frees.
struct SizeCache {
  FreeBlock* take = nullptr;
  FreeBlock* fill = nullptr;
  std::size_t filled = 0;
};

struct Cache {
  SizeCache sizes[2];
  ~Cache();
};

thread_local Cache t_cache;
// Set when this thread's cache was destroyed (at thread exit; for the main thread, before
// static objects such as a global Runtime are destroyed). From then on this thread allocates
// and frees straight through operator new and delete: the cache must not be used again, and
// release_unused must not free the blocks it handed to the shared stack a second time.
constinit thread_local bool t_cache_gone = false;

Cache::~Cache() {
  for (std::size_t size = 0; size < 2; ++size) {
    SizeCache& c = sizes[size];
    if (c.fill != nullptr) push_batch(size, c.fill);
    if (c.take != nullptr) push_batch(size, c.take);
    c.take = c.fill = nullptr;
    c.filled = 0;
  }
  t_cache_gone = true;
}

}  // namespace

std::size_t JobPool::block_bytes(Size size) noexcept { return kBlockBytes[index_of(size)]; }

// Under AddressSanitizer records go straight to operator new and delete, so that a use of a
// job after its last reference is reported, not hidden by a recycled block.
#if defined(__has_feature)  // clang
#if __has_feature(address_sanitizer)
#define SANDGLASS_JOB_POOL_OFF 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(SANDGLASS_JOB_POOL_OFF)  // GCC, clang
constexpr bool kPooled = false;
#else
constexpr bool kPooled = true;
#endif

void* JobPool::allocate(Size which) {
  const std::size_t size = index_of(which);
  if (!kPooled || t_cache_gone) return ::operator new(kBlockBytes[size]);
  SizeCache& cache = t_cache.sizes[size];
  if (cache.take == nullptr) {
    if (cache.fill != nullptr) {  // its own frees first
      cache.take = cache.fill;
      cache.fill = nullptr;
      cache.filled = 0;
    } else {
      cache.take = pop_batch(size);
    }
  }
  if (FreeBlock* b = cache.take) {
    cache.take = b->next;
    return b;
  }
  return ::operator new(kBlockBytes[size]);  // aligned for max_align_t
}

void JobPool::deallocate(void* block, Size which) noexcept {
  const std::size_t size = index_of(which);
  if (!kPooled || t_cache_gone) {
    ::operator delete(block);
    return;
  }
  SizeCache& cache = t_cache.sizes[size];
  auto* b = static_cast<FreeBlock*>(block);
  b->next = cache.fill;
  cache.fill = b;
  if (++cache.filled == kBatch) {
    push_batch(size, cache.fill);
    cache.fill = nullptr;
    cache.filled = 0;
  }
}

void JobPool::release_unused() noexcept {
  for (std::size_t size = 0; size < 2; ++size) {
    for (FreeBlock* batch = pop_batch(size); batch != nullptr; batch = pop_batch(size)) {
      free_chain(batch);
    }
  }
  if (t_cache_gone) return;  // its blocks were in the shared stacks: freed above
  for (SizeCache& cache : t_cache.sizes) {
    free_chain(cache.take);
    free_chain(cache.fill);
    cache.take = cache.fill = nullptr;
    cache.filled = 0;
  }
}

}  // namespace sandglass::detail
