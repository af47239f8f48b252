#include "daemon/api/job_records.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <chrono>

namespace sandglass::daemon {
namespace {

// The listing's index keeps this many ids beyond the terminal records kept: room for the live
// jobs among the most recent ones.
constexpr std::size_t kRecentSlack = 1024;

std::int64_t whole_ms(Duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

// A kind's result is JSON text; anything else is kept as a string.
boost::json::value result_value(const std::string& result) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(result, ec);
  if (ec) return boost::json::string{result};
  return v;
}

boost::json::object timings_json(Duration intake, Duration budget, Duration queue, Duration run,
                                 Duration remaining) {
  return {{"intake_ms", whole_ms(intake)},
          {"budget_ms", whole_ms(budget)},
          {"queue_ms", whole_ms(queue)},
          {"run_ms", whole_ms(run)},
          {"remaining_ms", whole_ms(remaining)}};
}

boost::json::array attempts_json(const std::vector<AttemptRecord>& attempts) {
  boost::json::array out;
  for (const AttemptRecord& a : attempts) {
    boost::json::object entry{{"state", to_string(a.state)},
                              {"reason", to_string(a.reason)},
                              {"run_ms", whole_ms(a.run_time)},
                              {"committed", a.committed}};
    if (!a.error.empty()) entry["error"] = a.error;
    out.push_back(std::move(entry));
  }
  return out;
}

}  // namespace

std::string attempts_json_text(const std::vector<AttemptRecord>& attempts) {
  return boost::json::serialize(attempts_json(attempts));
}

std::string_view live_state(const JobProgress& progress) noexcept {
  if (progress.scheduled) return "scheduled";
  return progress.started_at ? "running" : "queued";
}

std::string record_json(JobId id, const std::string& kind, const Outcome* outcome,
                        const JobProgress& progress, TimePoint now, const Arrival& arrival,
                        CancelCause requested, std::size_t waiters) {
  boost::json::object r;
  r["id"] = id;
  r["kind"] = kind;
  if (outcome == nullptr) {
    const std::string_view state = live_state(progress);
    const bool running = state == "running";
    const TimePoint start = running ? *progress.started_at : now;
    r["state"] = state;
    r["reason"] = nullptr;
    if (requested != CancelCause::none) r["cause"] = to_string(requested);
    r["waiters"] = waiters;
    if (running) r["worker"] = progress.worker;
    // A delayed job's budget counts from its start, which may lie ahead: no queue time yet.
    r["timings"] = timings_json(arrival.intake, arrival.budget.value_or(progress.budget),
                                std::max(start - progress.enqueued_at, Duration::zero()), now - start,
                                progress.deadline.slack(now));
    return boost::json::serialize(r);
  }
  const Outcome& o = *outcome;
  r["state"] = to_string(o.state);
  r["reason"] = to_string(o.reason);
  if (o.cause != CancelCause::none) r["cause"] = to_string(o.cause);
  r["committed"] = o.committed;
  if (!o.result.empty()) r["result"] = result_value(o.result);
  if (!o.error.empty()) r["error"] = o.error;
  const Timings& t = o.timings;
  r["timings"] = timings_json(arrival.intake, arrival.budget.value_or(t.budget), t.queue_wait,
                              t.run_time, t.remaining_at_end);
  if (!o.attempts.empty()) r["attempts"] = attempts_json(o.attempts);
  if (o.retry_stop != RetryStop::none) r["retry_stopped"] = to_string(o.retry_stop);
  return boost::json::serialize(r);
}

void JobRecords::add(const JobHandle& handle, const std::string& kind, Arrival arrival) {
  std::lock_guard lock{mu_};
  recent_.push_back(handle.id());
  if (recent_.size() > retention_.max_count + kRecentSlack) recent_.pop_front();
  // finish() came first, and its record was forgotten already (more than max_count outcomes
  // since): it stays forgotten. Re-creating it would push a newer record out.
  if (forgotten_before_add_.erase(handle.id()) > 0) return;
  // finish() may have been first (it creates the entry); the arrival is the submitter's to say.
  Entry& e = entries_[handle.id()];
  e.added = true;
  e.arrival = arrival;
  if (e.outcome) return;
  // Live until finish(), even if the runtime has published its outcome already: the record
  // turns terminal only once the daemon counted the outcome (see the class comment).
  e.handle = handle;
  e.kind = kind;
  live_.insert(handle.id());
}

void JobRecords::finish(const Outcome& outcome) {
  const TimePoint now = Clock::now();
  ToCall to_call;
  bool notify = false;
  {
    std::lock_guard lock{mu_};
    to_call = record_outcome(outcome, now);
    notify = blocked_ > 0;
  }
  if (notify) recorded_.notify_all();  // pairs with the wait in outcome_until
  for (Waiter& w : to_call.waiters) w(outcome, to_call.arrival);
}

JobRecords::ToCall JobRecords::record_outcome(const Outcome& outcome, TimePoint now) {
  Entry& e = entries_[outcome.id];
  if (e.outcome) return {};
  const std::size_t bytes = outcome.result.size() + outcome.error.size();
  e.kind = outcome.kind;
  e.outcome = outcome;
  e.handle = {};  // the job is over; its record no longer needs it
  e.interest = 0;
  live_.erase(outcome.id);
  ToCall to_call{.waiters = std::move(e.waiters), .arrival = e.arrival};
  finished_.push_back({now, outcome.id, bytes});
  finished_bytes_ += bytes;
  forget_old(now);
  return to_call;
}

void JobRecords::forget_old(TimePoint now) {
  while (!finished_.empty()) {
    const Finished& f = finished_.front();
    const bool too_old = now - f.at > retention_.keep;
    const bool too_many = finished_.size() > retention_.max_count;
    const bool too_big = finished_bytes_ > retention_.max_bytes;
    if (!too_old && !too_many && !too_big) break;
    const auto it = entries_.find(f.id);
    if (it != entries_.end()) {
      if (!it->second.added) forgotten_before_add_.insert(f.id);
      const auto key = keys_.find(it->second.key);
      if (key != keys_.end() && key->second.id == f.id) keys_.erase(key);
      entries_.erase(it);
    }
    finished_bytes_ -= f.bytes;
    finished_.pop_front();
  }
}

bool JobRecords::wait(JobId id, Waiter waiter, Interest interest) {
  std::unique_lock lock{mu_};
  const auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  Entry& e = it->second;
  if (e.outcome) {
    const Outcome o = *e.outcome;
    const Arrival arrival = e.arrival;
    lock.unlock();
    waiter(o, arrival);
    return true;
  }
  e.waiters.push_back(std::move(waiter));
  if (interest == Interest::held) ++e.interest;
  return true;
}

void JobRecords::leave(JobId id) {
  JobHandle to_cancel;
  {
    std::lock_guard lock{mu_};
    const auto it = entries_.find(id);
    if (it == entries_.end() || it->second.outcome || it->second.interest == 0) return;
    // A keyed job goes on: a retry with its key is expected to attach to it, and its own
    // budget still ends it.
    if (--it->second.interest == 0 && it->second.key.empty()) cancel_locked(it->second, to_cancel);
  }
  to_cancel.cancel();  // outside the lock: a queued job's outcome is recorded on this thread
}

void JobRecords::cancel_locked(Entry& entry, JobHandle& to_cancel) {
  if (!entry.handle) return;
  entry.cancel_requested = CancelCause::caller;
  to_cancel = entry.handle;
}

JobRecords::KeyedSubmit JobRecords::submit_keyed(const std::string& key, const std::string& fingerprint,
                                                 const std::function<JobId()>& submit) {
  std::lock_guard serial{keyed_submit_mu_};
  {
    std::lock_guard lock{mu_};
    const auto k = keys_.find(key);
    if (k != keys_.end()) {
      if (k->second.fingerprint != fingerprint) return {.id = k->second.id, .conflict = true};
      const auto e = entries_.find(k->second.id);
      const bool reusable = e != entries_.end() &&
                            (!e->second.outcome || e->second.outcome->state == State::completed ||
                             e->second.outcome->state == State::failed);
      if (reusable) return {.id = k->second.id, .attached = true};
    }
  }
  const JobId id = submit();  // may record the outcome at once: takes mu_ itself
  std::lock_guard lock{mu_};
  const auto e = entries_.find(id);
  if (e == entries_.end()) return {.id = id};  // forgotten already: nothing to attach to
  keys_[key] = {id, fingerprint};
  e->second.key = key;
  return {.id = id};
}

std::optional<std::string> JobRecords::find_json(JobId id) {
  TimePoint now = Clock::now();
  Entry e;  // a copy of the entry without its waiters: rendered outside the lock
  {
    std::lock_guard lock{mu_};
    forget_old(now);
    const auto it = entries_.find(id);
    if (it == entries_.end()) return std::nullopt;
    const Entry& found = it->second;
    e.kind = found.kind;
    e.arrival = found.arrival;
    if (found.outcome) {
      e.outcome = found.outcome;
    } else {
      e.handle = found.handle;
      e.cancel_requested = found.cancel_requested;
      e.interest = found.interest;
    }
  }
  if (e.outcome) return record_json(id, e.kind, &*e.outcome, {}, now, e.arrival);
  const JobProgress progress = e.handle.progress();
  now = Clock::now();  // after the progress: a job that started meanwhile has run 0 ms, not less
  return record_json(id, e.kind, nullptr, progress, now, e.arrival, e.cancel_requested,
                     e.interest);
}

JobHandle JobRecords::cancel(JobId id) {
  JobHandle to_cancel;
  {
    std::lock_guard lock{mu_};
    const auto it = entries_.find(id);
    if (it == entries_.end()) return {};
    if (!it->second.outcome) it->second.arrival.cancelled_by_request = true;
    cancel_locked(it->second, to_cancel);
  }
  to_cancel.cancel();  // outside the lock: a queued job's outcome is recorded on this thread
  return to_cancel;
}

std::optional<Outcome> JobRecords::outcome_until(JobId id, Deadline deadline) {
  std::unique_lock lock{mu_};
  ++blocked_;
  std::optional<Outcome> found;
  // Woken by finish() (which notifies after it recorded an outcome); an id that is unknown, or
  // forgotten meanwhile, ends the wait at once.
  recorded_.wait_until(lock, deadline.time_point(), [&] {
    const auto it = entries_.find(id);
    if (it == entries_.end()) return true;
    found = it->second.outcome;
    return found.has_value();
  });
  --blocked_;
  return found;
}

std::optional<Outcome> JobRecords::outcome(JobId id) const {
  std::lock_guard lock{mu_};
  const auto it = entries_.find(id);
  if (it == entries_.end()) return std::nullopt;
  return it->second.outcome;
}

std::vector<JobId> JobRecords::recent_ids() const {
  std::lock_guard lock{mu_};
  return {recent_.begin(), recent_.end()};
}

std::vector<JobId> JobRecords::live_ids() const {
  std::lock_guard lock{mu_};
  return {live_.begin(), live_.end()};
}

std::optional<JobRecords::View> JobRecords::view(JobId id) const {
  std::lock_guard lock{mu_};
  const auto it = entries_.find(id);
  if (it == entries_.end()) return std::nullopt;
  const Entry& e = it->second;
  if (e.outcome) return View{.kind = e.kind, .outcome = e.outcome, .arrival = e.arrival};
  return View{.kind = e.kind, .progress = e.handle.progress(),
              .cancel_requested = e.cancel_requested, .waiters = e.interest, .arrival = e.arrival};
}

std::size_t JobRecords::size() const {
  std::lock_guard lock{mu_};
  return entries_.size();
}

}  // namespace sandglass::daemon
