#include "daemon/cluster/held_runs.hpp"

#include <algorithm>

namespace sandglass::daemon::cluster {

HeldRuns::Added HeldRuns::add(RunId run, Duration work, Duration tail) {
  Added added;
  std::lock_guard lock{mu_};
  added.cancel_first = early_cancels_.erase(run.id) > 0;
  // Older attempts of this job held here: their row says this attempt now.
  for (auto it = runs_.lower_bound(RunId{run.id, 0}); it != runs_.end() && it->first < run; ++it) {
    if (it->second.handle) {
      added.stale.push_back(it->second.handle);
    } else {
      it->second.cancel_pending = true;
    }
  }
  runs_[run] = Held{.cancel_pending = added.cancel_first, .work = work, .tail = tail};
  return added;
}

bool HeldRuns::attach(RunId run, const JobHandle& handle) {
  std::lock_guard lock{mu_};
  const auto it = runs_.find(run);
  if (it == runs_.end()) return true;
  it->second.handle = handle;
  // A newer attempt of the same job added meanwhile makes this one stale.
  const auto next = std::next(it);
  const bool newer = next != runs_.end() && next->first.id == run.id;
  return it->second.cancel_pending || newer;
}

void HeldRuns::started(RunId run, TimePoint now) {
  std::lock_guard lock{mu_};
  if (const auto it = runs_.find(run); it != runs_.end() && !it->second.started_at) {
    it->second.started_at = now;
  }
}

void HeldRuns::remove(RunId run) {
  std::lock_guard lock{mu_};
  runs_.erase(run);
}

std::vector<JobHandle> HeldRuns::cancel(JobId id, std::optional<int> attempt) {
  std::vector<JobHandle> handles;
  std::lock_guard lock{mu_};
  bool found = false;
  for (auto it = runs_.lower_bound(RunId{id, 0}); it != runs_.end() && it->first.id == id; ++it) {
    if (attempt && it->first.attempt != *attempt) continue;
    found = true;
    if (it->second.handle) {
      handles.push_back(it->second.handle);
    } else {
      it->second.cancel_pending = true;
    }
  }
  if (!found && !attempt && early_cancels_.insert(id).second) {
    early_order_.push_back(id);
    if (early_order_.size() > kEarlyCancels) {
      early_cancels_.erase(early_order_.front());
      early_order_.pop_front();
    }
  }
  return handles;
}

std::vector<JobHandle> HeldRuns::cancel_all() {
  std::vector<JobHandle> handles;
  std::lock_guard lock{mu_};
  for (auto& [run, held] : runs_) {
    if (held.handle) handles.push_back(held.handle);
  }
  runs_.clear();
  return handles;
}

std::vector<JobId> HeldRuns::unstarted() const {
  std::vector<JobId> out;
  std::lock_guard lock{mu_};
  for (const auto& [run, held] : runs_) {
    if (!held.started_at && (out.empty() || out.back() != run.id)) out.push_back(run.id);
  }
  return out;
}

std::vector<RunId> HeldRuns::runs() const {
  std::vector<RunId> out;
  std::lock_guard lock{mu_};
  out.reserve(runs_.size());
  for (const auto& [run, held] : runs_) out.push_back(run);
  return out;
}

std::pair<std::int64_t, Duration> HeldRuns::load(TimePoint now) const {
  std::int64_t busy = 0;
  Duration rest{};
  std::lock_guard lock{mu_};
  for (const auto& [run, h] : runs_) {
    ++busy;
    rest += h.started_at ? std::max(*h.started_at + h.tail - now, Duration::zero()) : h.work;
  }
  return {busy, rest};
}

}  // namespace sandglass::daemon::cluster
