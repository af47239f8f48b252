#include <sandglass/cancel.hpp>

namespace sandglass {
namespace detail {

bool CancelState::cancel(CancelCause cause) noexcept {
  CancelCause expected = CancelCause::none;
  // Pairs with the acquire in cause() (publication) and the seq_cst load in cause_seq_cst()
  // (commit hand-shake). Relaxed on failure: the loser only learns that it lost.
  if (!cause_.compare_exchange_strong(expected, cause, std::memory_order_seq_cst,
                                      std::memory_order_relaxed)) {
    return false;
  }
  stop_.request_stop();  // runs the callbacks on this thread, outside std's internal lock
  return true;
}

void CancelState::link_to(const std::shared_ptr<CancelState>& parent) {
  if (!parent) return;
  parent_ = parent;
  // Runs Forward at once when the parent is already cancelled.
  parent_link_.emplace(parent->stop_token(), Forward{this});
}

}  // namespace detail

CancelSource::CancelSource() : state_{std::make_shared<detail::CancelState>()} {}

CancelSource::CancelSource(const CancelToken& parent) : CancelSource() {
  state_->link_to(CancelAccess::state(parent));
}

}  // namespace sandglass
