// asio_cancellation.hpp — `AsioCancellation`: makes Asio async operations complete with
// `operation_aborted` when a `CancelToken` is cancelled.
//
//   sandglass::AsioCancellation bridge{ctx.token(), socket.get_executor()};
//   socket.async_read_some(buffer,
//       boost::asio::bind_cancellation_slot(bridge.slot(), [](error_code ec, std::size_t) {
//         // ec == boost::asio::error::operation_aborted once the token is cancelled
//       }));
//
// Asio's per-operation cancellation signals are not thread-safe, while tokens are cancelled on
// any thread; so the bridge posts the emission of a terminal cancellation to `executor`, the
// executor the operations run on. A cancellation that arrives while no operation is bound is
// remembered: `cancelled()` tells, and the next operation should not be started.
//
// The bridge must outlive the operations bound to its slot (as with any
// `boost::asio::cancellation_signal`); bind at most one operation at a time. The executor's context
// must outlive every thread that may still cancel the token (it posts there).
//
// Thread safety: the bridge belongs to its executor's context: construct, use and destroy it
// there. The token may be cancelled on any thread.
#pragma once

#include <sandglass/cancel.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/post.hpp>

#include <memory>

namespace sandglass {

class AsioCancellation {
 public:
  AsioCancellation(const CancelToken& token, boost::asio::any_io_executor executor)
      : state_{std::make_shared<State>()} {
    registration_ = token.on_cancel([state = state_, executor]() noexcept {
      // post() may allocate; an allocation failure here must not escape a noexcept callback.
      try {
        boost::asio::post(executor, [state] {
          state->fired = true;
          state->signal.emit(boost::asio::cancellation_type::terminal);
        });
      } catch (...) {
      }
    });
  }
  AsioCancellation(const AsioCancellation&) = delete;
  AsioCancellation& operator=(const AsioCancellation&) = delete;
  // Deregisters from the token; blocks while its callback runs on another thread.
  ~AsioCancellation() = default;

  // The slot to bind to one operation with `boost::asio::bind_cancellation_slot`.
  boost::asio::cancellation_slot slot() noexcept { return state_->signal.slot(); }
  // True once the cancellation has been emitted on this bridge's executor.
  bool cancelled() const noexcept { return state_->fired; }

 private:
  struct State {
    boost::asio::cancellation_signal signal;
    bool fired = false;  // only touched on the executor
  };

  std::shared_ptr<State> state_;
  CancelRegistration registration_;  // last: deregistered first
};

}  // namespace sandglass
