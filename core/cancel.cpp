#include <sandglass/cancel.hpp>

namespace sandglass {
namespace detail {

bool CancelState::signal(CancelCause cause) noexcept {
  auto expected = static_cast<std::uint8_t>(CancelCause::none);
  // Pairs with the acquire in cause() (publication). Relaxed on failure: the loser (a later
  // cause, or a cancellation after close()) only learns that it lost.
  return word_.compare_exchange_strong(expected, static_cast<std::uint8_t>(cause),
                                       std::memory_order_seq_cst, std::memory_order_relaxed);
}

void CancelState::run_callbacks() noexcept {
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
}

CancelCause CancelState::close() noexcept {
  auto expected = static_cast<std::uint8_t>(CancelCause::none);
  // Pairs with the exchange in signal(): exactly one of the two moves the word off `none`.
  if (word_.compare_exchange_strong(expected, kClosed, std::memory_order_seq_cst,
                                    std::memory_order_acquire)) {
    return CancelCause::none;
  }
  return decode(expected);
}

std::optional<std::stop_token> CancelState::stop_token_for_callback() {
  std::lock_guard lock{mu_};
  const std::uint8_t word = word_.load(std::memory_order_acquire);
  if (word != kClosed && word != static_cast<std::uint8_t>(CancelCause::none)) {
    return std::nullopt;
  }
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
