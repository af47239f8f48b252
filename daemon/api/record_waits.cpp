#include "daemon/api/record_waits.hpp"

#include "daemon/api/api.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <mutex>
#include <thread>
#include <utility>

namespace sandglass::daemon {
namespace {

namespace asio = boost::asio;

// One waiting reader. Owned by its timer's pending handler (so it lives no longer than the
// io_context); the record's waiter and the client's ClientGone hold it weakly.
class PendingAnswer {
 public:
  PendingAnswer(asio::io_context& io, RecordWaits::Respond respond)
      : timer_{io}, respond_{std::move(respond)} {}

  // Starts the limit's timer; `on_limit` runs on the timer thread when it fires.
  template <typename OnLimit>
  void start_timer(TimePoint limit, OnLimit on_limit) {
    std::lock_guard lock{mu_};
    timer_.expires_at(limit);
    timer_.async_wait([on_limit = std::move(on_limit)](boost::system::error_code ec) {
      if (!ec) on_limit();
    });
  }

  // Gives `answer` unless an answer was given already (or the client went away), and ends the
  // timer, which releases this object.
  void answer(HttpResponse answer) {
    std::lock_guard lock{mu_};
    if (respond_) respond_(std::move(answer));
    respond_ = {};
    timer_.cancel();
  }

  void abandon() {
    std::lock_guard lock{mu_};
    respond_ = {};
    timer_.cancel();
  }

 private:
  std::mutex mu_;
  asio::steady_timer timer_;      // guarded by mu_
  RecordWaits::Respond respond_;  // guarded by mu_; empty once answered or abandoned
};

}  // namespace

class RecordWaits::Impl {
 public:
  Impl() : thread_{[this] { io_.run(); }} {}
  ~Impl() {
    work_.reset();
    io_.stop();
    thread_.join();
  }

  asio::io_context io_;

 private:
  asio::executor_work_guard<asio::io_context::executor_type> work_{io_.get_executor()};
  std::thread thread_;  // runs io_: the limits' timers
};

RecordWaits::RecordWaits() : impl_{std::make_unique<Impl>()} {}
RecordWaits::~RecordWaits() = default;

std::optional<RecordWaits::ClientGone> RecordWaits::wait(JobRecords& records, JobId id,
                                                         Duration reserve, Respond respond) {
  const auto view = records.view(id);
  if (!view) return std::nullopt;
  // A terminal record's progress names no deadline: its answer comes at once anyway.
  const TimePoint limit = saturating_add(view->progress.deadline.time_point(), reserve);
  auto pending = std::make_shared<PendingAnswer>(impl_->io_, std::move(respond));
  // The record is rendered before the answer's lock is taken: never records' lock inside it.
  pending->start_timer(limit, [pending, &records, id] {
    auto json = records.find_json(id);
    pending->answer(json ? HttpResponse{.body = std::move(*json)} : no_such_job());
  });
  const std::weak_ptr<PendingAnswer> weak = pending;
  const bool known = records.wait(
      id,
      [weak](const Outcome& o, const Arrival& arrival) {
        if (auto p = weak.lock()) {
          p->answer({.body = record_json(o.id, o.kind, &o, {}, {}, arrival)});
        }
      },
      JobRecords::Interest::none);
  if (!known) pending->answer(no_such_job());  // forgotten since the view above
  return [weak] {
    if (auto p = weak.lock()) p->abandon();
  };
}

}  // namespace sandglass::daemon
