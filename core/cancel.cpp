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
  bool has_callbacks = false;
  {
    // Either stop_token_for_callback() saw the cause (and runs its callback itself), or we see
    // the stop_source it created: each callback runs exactly once.
    std::lock_guard lock{mu_};
    has_callbacks = stop_.stop_possible();
  }
  // stop_ no longer changes once created. request_stop runs the callbacks on this thread,
  // outside our lock and outside std's internal one.
  if (has_callbacks) stop_.request_stop();
  return true;
}

std::optional<std::stop_token> CancelState::stop_token_for_callback() {
  std::lock_guard lock{mu_};
  if (cause_.load(std::memory_order_acquire) != CancelCause::none) return std::nullopt;
  if (!stop_.stop_possible()) stop_ = std::stop_source{};
  return stop_.get_token();
}

void CancelState::link_to(const std::shared_ptr<CancelState>& parent) {
  if (!parent) return;
  parent_ = parent;
  std::optional<std::stop_token> token = parent->stop_token_for_callback();
  if (!token) {
    cancel(CancelCause::upstream);
    return;
  }
  parent_link_.emplace(std::move(*token), Forward{this});
}

}  // namespace detail

CancelSource::CancelSource() : state_{std::make_shared<detail::CancelState>()} {}

CancelSource::CancelSource(const CancelToken& parent) : CancelSource() {
  state_->link_to(CancelAccess::state(parent));
}

}  // namespace sandglass
