#include <sandglass/cancel.hpp>

#include "core/install_once.hpp"

namespace sandglass {
namespace detail {

struct CancelState::Callbacks {
  std::stop_source stop;
  CancelStateRef parent;  // kept alive while linked
  std::optional<std::stop_callback<Forward>> parent_link;  // last: deregisters first
};

bool CancelState::signal(CancelCause cause) noexcept {
  auto expected = static_cast<std::uint8_t>(CancelCause::none);
  // Pairs with the acquire in cause() (publication). Relaxed on failure: the loser (a later
  // cause, or a cancellation after close()) only learns that it lost.
  return word_.compare_exchange_strong(expected, static_cast<std::uint8_t>(cause),
                                       std::memory_order_seq_cst, std::memory_order_relaxed);
}

CancelState::~CancelState() { delete callbacks_.load(std::memory_order_acquire); }

CancelState::Callbacks& CancelState::callbacks() {
  // Seq_cst, pairing with the load in run_callbacks(): see stop_token_for_callback().
  return install_once(callbacks_);
}

void CancelState::run_callbacks() noexcept {
  // Either stop_token_for_callback() saw the cause (and its caller runs its callback itself),
  // or this load sees the callbacks it installed: each callback runs exactly once. (Both sides
  // are seq_cst: the installer's exchange comes before its load of word_, the canceller's
  // exchange of word_ before this load.) request_stop runs the callbacks on this thread,
  // outside std's internal lock.
  if (Callbacks* c = callbacks_.load(std::memory_order_seq_cst)) c->stop.request_stop();
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
  Callbacks& c = callbacks();  // installed (seq_cst) before word_ is read
  const std::uint8_t word = word_.load(std::memory_order_seq_cst);
  if (word != kClosed && word != static_cast<std::uint8_t>(CancelCause::none)) {
    return std::nullopt;
  }
  return c.stop.get_token();
}

void CancelState::link_to(const CancelStateRef& parent) {
  if (!parent) return;
  Callbacks& c = callbacks();
  c.parent = parent;
  std::optional<std::stop_token> token = parent->stop_token_for_callback();
  if (!token) {
    cancel(CancelCause::upstream);
    return;
  }
  c.parent_link.emplace(std::move(*token), Forward{this});
}

}  // namespace detail

namespace {
void destroy_alone(detail::CancelState& state) noexcept { delete &state; }
}  // namespace

CancelSource::CancelSource()
    : state_{detail::CancelStateRef::adopt(new detail::CancelState, &destroy_alone)} {}

CancelSource::CancelSource(const CancelToken& parent) : CancelSource() {
  state_->link_to(parent.state_);
}

}  // namespace sandglass
