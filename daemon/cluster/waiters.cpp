#include "daemon/cluster/waiters.hpp"

#include <algorithm>
#include <utility>

namespace sandglass::daemon::cluster {

bool Waiters::add(JobId id, ClusterNode::Respond respond, TimePoint due,
                  std::function<HttpResponse(const Record&)> answer_from_row) {
  Waiter w{id, std::move(respond), due, std::move(answer_from_row)};
  std::lock_guard lock{mu_};
  if (recent_set_.contains(id)) {
    late_.push_back(std::move(w));
    return true;
  }
  insert(std::move(w));
  return false;
}

std::vector<Waiter> Waiters::noticed(JobId id) {
  std::lock_guard lock{mu_};
  remember(id);
  return remove_job(id);
}

void Waiters::put_back(std::vector<Waiter> waiters, TimePoint now, Duration recheck) {
  const TimePoint again = Deadline::after(recheck, now).time_point();
  std::lock_guard lock{mu_};
  for (Waiter& w : waiters) {
    recent_set_.erase(w.id);  // its deque entry ages out harmlessly
    if (!w.answer_from_row) w.due = std::max(w.due, again);  // a reader keeps its own
    insert(std::move(w));
  }
}

std::vector<Waiter> Waiters::take_due(TimePoint now) {
  std::vector<Waiter> out;
  std::lock_guard lock{mu_};
  while (!by_due_.empty() && by_due_.begin()->first <= now) {
    const auto it = by_due_.begin();
    auto& of_job = by_job_[it->second.id];
    std::erase(of_job, it);
    if (of_job.empty()) by_job_.erase(it->second.id);
    out.push_back(std::move(it->second));
    by_due_.erase(it);
  }
  return out;
}

std::vector<Waiter> Waiters::take_late() {
  std::lock_guard lock{mu_};
  return std::exchange(late_, {});
}

std::vector<Waiter> Waiters::take_all() {
  std::lock_guard lock{mu_};
  std::vector<Waiter> out = std::exchange(late_, {});
  for (auto& [due, w] : by_due_) out.push_back(std::move(w));
  by_due_.clear();
  by_job_.clear();
  return out;
}

TimePoint Waiters::next_due() const {
  std::lock_guard lock{mu_};
  return by_due_.empty() ? TimePoint::max() : by_due_.begin()->first;
}

void Waiters::insert(Waiter w) {
  const JobId id = w.id;
  const TimePoint due = w.due;
  by_job_[id].push_back(by_due_.emplace(due, std::move(w)));
}

void Waiters::remember(JobId id) {
  if (!recent_set_.insert(id).second) return;
  recent_.push_back(id);
  if (recent_.size() > recent_limit_) {
    recent_set_.erase(recent_.front());
    recent_.pop_front();
  }
}

std::vector<Waiter> Waiters::remove_job(JobId id) {
  std::vector<Waiter> out;
  const auto it = by_job_.find(id);
  if (it == by_job_.end()) return out;
  for (const DueOrder::iterator& w : it->second) {
    out.push_back(std::move(w->second));
    by_due_.erase(w);
  }
  by_job_.erase(it);
  return out;
}

}  // namespace sandglass::daemon::cluster
