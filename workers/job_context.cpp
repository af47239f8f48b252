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
  if (!committed()) throw_cancelled();
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

bool JobContext::settle_cancelled() noexcept {
  Phase expected = Phase::open;
  // Pairs with the exchange in commit(); acquire on failure, to see the winner's writes.
  if (phase_.compare_exchange_strong(expected, Phase::cancelled, std::memory_order_acq_rel,
                                     std::memory_order_acquire)) {
    return true;
  }
  return expected == Phase::cancelled;
}

void JobContext::commit() {
  if (token_.cancelled()) {
    // Recorded on the token already: the cancellation wins unless commit() won before (then
    // this is a repeated call), and its on_cancel callbacks run or ran on the cancelling thread.
    if (settle_cancelled()) throw_cancelled();
    return;
  }
  if (recorder_ != nullptr && phase_.load(std::memory_order_acquire) == Phase::open) {
    // Refused: the recorder cancelled the job, or is about to, or its token was cancelled while
    // it waited. Recorded, but cancelled meanwhile: the cancellation came first, as above. The
    // phase leaves `open` either way, so that no later commit() passes.
    if (!recorder_->record(*this) || token_.cancelled()) {
      settle_cancelled();
      throw Cancelled{token_.cancelled() ? token_.cause() : CancelCause::caller};
    }
  }
  Phase expected = Phase::open;
  // Pairs with the exchange in settle_cancelled(), called by the on_cancel wrappers on the
  // cancelling thread: exactly one of the two leaves `open`.
  if (phase_.compare_exchange_strong(expected, Phase::committed, std::memory_order_acq_rel,
                                     std::memory_order_acquire) ||
      expected == Phase::committed) {
    return;
  }
  throw_cancelled();
}

}  // namespace sandglass
