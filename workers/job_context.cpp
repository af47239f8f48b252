#include <sandglass/job_context.hpp>

#include <condition_variable>
#include <mutex>
#include <optional>
#include <stop_token>

namespace sandglass {

const char* Cancelled::what() const noexcept {
  switch (cause_) {
    case CancelCause::caller: return "cancelled by the caller";
    case CancelCause::deadline: return "cancelled: deadline exceeded";
    case CancelCause::upstream: return "cancelled upstream";
    case CancelCause::shutdown: return "cancelled: shutting down";
    case CancelCause::none: break;
  }
  return "cancelled";
}

JobContext::JobContext(JobId id, std::string_view kind, Deadline deadline, CancelToken token,
                       const BudgetPolicy& policy, std::string_view idempotency_key)
    : id_{id},
      kind_{kind},
      idempotency_key_{idempotency_key},
      deadline_{deadline},
      token_{std::move(token)},
      policy_{&policy} {}

JobContext::~JobContext() = default;

void JobContext::throw_cancelled() const { throw Cancelled{token_.cause()}; }

void JobContext::throw_if_not_committed() const {
  if (!committed_.load(std::memory_order_relaxed)) throw_cancelled();
}

void JobContext::sleep_until(Deadline until) {
  checkpoint();
  std::mutex mu;
  std::condition_variable_any woken;
  std::unique_lock lock{mu};
  const auto& state = CancelAccess::state(token_);
  std::optional<std::stop_token> stop;
  if (state && !committed()) {
    stop = state->stop_token_for_callback();
    if (!stop) throw_cancelled();  // cancelled since the checkpoint above
  }
  auto cancelled_now = [&] { return cancelled() && !committed(); };
  while (!until.expired()) {
    if (stop) {
      // Returns early once the token's stop is requested (cancel() requests it).
      if (woken.wait_until(lock, *stop, until.time_point(), cancelled_now)) break;
    } else {
      woken.wait_until(lock, until.time_point());
    }
  }
  checkpoint();
}

void JobContext::commit() {
  if (committed_.load(std::memory_order_relaxed)) return;
  // Dekker hand-shake with the on_cancel wrappers: store our flag, then look at theirs. Pairs
  // with the seq_cst exchange in CancelState::cancel and the seq_cst load in the wrapper.
  committed_.store(true, std::memory_order_seq_cst);
  const auto& state = CancelAccess::state(token_);
  if (state && state->cause_seq_cst() != CancelCause::none) {
    committed_.store(false, std::memory_order_relaxed);
    throw_cancelled();
  }
}

}  // namespace sandglass
