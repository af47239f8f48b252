// install_once.hpp — a part of a record made on first use: `CancelState`'s callback list,
// `Job`'s extras. Private to the library.
#pragma once

#include <atomic>
#include <memory>

namespace sandglass::detail {

// What `slot` points to, made (default-constructed) by the first caller and installed with one
// compare-and-swap; a caller that loses the race frees its own and returns the winner's. Both
// the load and the exchange are seq_cst: callers pair them with seq_cst accesses of their own
// (see CancelState::callbacks and Job::extras). Whoever owns `slot` deletes what it points to.
template <class T>
T& install_once(std::atomic<T*>& slot) {
  T* existing = slot.load(std::memory_order_seq_cst);
  if (existing != nullptr) return *existing;
  auto fresh = std::make_unique<T>();
  if (slot.compare_exchange_strong(existing, fresh.get(), std::memory_order_seq_cst)) {
    return *fresh.release();
  }
  return *existing;  // another thread was first
}

}  // namespace sandglass::detail
