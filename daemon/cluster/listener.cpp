// The listener thread of a cluster node (node_impl.hpp): one connection that LISTENs on
// sandglass_outcome (answers this node's waiters, learns run times), sandglass_cancel (cancels
// a local job) and sandglass_queued (wakes the claimer: sent only while some node is hungry,
// i.e. its last claim came back short, 009_hungry_nodes.sql); after a reconnect it reads what the
// NOTIFYs it missed would have said. An outcome is announced only when its job is awaited or
// its node shares that batch's run times (008_awaited_outcomes.sql); every waiter registered
// here is for an awaited job (its submission's statement marked it), so its NOTIFY comes. The
// notify lag is observed for this node's announced outcomes only.
#include "daemon/cluster/job_rows.hpp"
#include "daemon/cluster/node_impl.hpp"

#include <spdlog/spdlog.h>

namespace sandglass::daemon::cluster {

using std::chrono::microseconds;

void ClusterNode::Impl::add_waiter(JobId id, const Respond& respond) {
  {
    std::lock_guard lock{wait_mu_};
    if (!recent_set_.contains(id)) {
      waiters_[id].push_back(respond);
      return;
    }
    // Its outcome's NOTIFY came before this waiter: the listener reads the record.
    late_.push_back({id, respond});
  }
  listener_wake_.wake();
}

void ClusterNode::Impl::remember_outcome(JobId id) {  // under wait_mu_
  if (recent_set_.insert(id).second) {
    recent_.push_back(id);
    if (recent_.size() > kRecentOutcomes) {
      recent_set_.erase(recent_.front());
      recent_.pop_front();
    }
  }
}

void ClusterNode::Impl::listener_loop(std::stop_token st) {
  std::optional<PgSession> db;
  bool resync = false;  // after a reconnect: notifications may have been missed
  while (!st.stop_requested()) {
    try {
      if (!db || db->broken()) {
        ensure(db);
        db->exec("LISTEN sandglass_outcome; LISTEN sandglass_cancel; LISTEN sandglass_queued");
        listening_.store(true, std::memory_order_release);  // pairs with the wait in start()
        listening_.notify_all();
        if (resync) {  // what NOTIFYs said while it was away
          wake_claimer();
          answer_all_terminal(*db);
          const PgRows asked = db->exec(
              "SELECT id FROM sandglass_jobs WHERE owner = $1 AND state = 'running' AND cancel_requested",
              {owner()});
          for (int r = 0; r < asked.rows(); ++r) cancel_local(static_cast<JobId>(asked.integer(r, 0)));
        }
        resync = true;
      }
      const auto notes = db->wait_notifications(Deadline::after(config_.poll), listener_wake_.fd());
      listener_wake_.clear();
      handle_notifications(*db, notes);
    } catch (const PgError& e) {
      db_failed(e, "listener");
      db.reset();
      std::this_thread::sleep_for(kReconnectBackoff);
    }
  }
  listening_.store(true, std::memory_order_release);  // start() must not wait for a stopped one
  listening_.notify_all();
}

void ClusterNode::Impl::handle_notifications(PgSession& db, const std::vector<Notification>& notes) {
  std::vector<std::pair<JobId, Respond>> to_answer;
  bool queued = false;
  const TimePoint now = Clock::now();
  {
    std::lock_guard lock{wait_mu_};
    to_answer.swap(late_);
  }
  for (const Notification& n : notes) {
    if (n.channel == "sandglass_queued") {
      queued = true;
      continue;
    }
    if (n.channel == "sandglass_cancel") {  // "ID OWNER"
      const std::size_t sp = n.payload.find(' ');
      const auto id = parse_int(std::string_view{n.payload}.substr(0, sp));
      if (id && sp != std::string::npos && std::string_view{n.payload}.substr(sp + 1) == owner()) {
        cancel_local(static_cast<JobId>(*id));
      }
      continue;
    }
    // One line "ID KIND RUN_US" per job that ended (003_batched.sql), newline-separated.
    std::string_view lines{n.payload};
    while (!lines.empty()) {
      const std::size_t nl = lines.find('\n');
      outcome_noticed(lines.substr(0, nl), now, to_answer);
      lines = nl == std::string_view::npos ? std::string_view{} : lines.substr(nl + 1);
    }
  }
  if (queued) wake_claimer();
  answer(db, std::move(to_answer));
}

// One outcome line "ID KIND RUN_US": learns the run time, the notify lag, and moves the job's
// waiters to `to_answer`.
void ClusterNode::Impl::outcome_noticed(std::string_view line, TimePoint now,
                     std::vector<std::pair<JobId, Respond>>& to_answer) {
  const std::size_t sp = line.find(' ');
  const auto parsed = parse_int(line.substr(0, sp));
  if (!parsed || sp == std::string_view::npos) return;
  const JobId id = static_cast<JobId>(*parsed);
  const std::string_view rest = line.substr(sp + 1);
  const std::size_t sp2 = rest.rfind(' ');
  if (sp2 != std::string_view::npos) {
    if (const auto run_us = parse_int(rest.substr(sp2 + 1)); run_us && *run_us >= 0) {
      record_run(std::string{rest.substr(0, sp2)}, microseconds{*run_us});
    }
  }
  {
    std::lock_guard lock{lag_mu_};
    if (const auto it = finish_sent_.find(id); it != finish_sent_.end()) {
      metrics_.notify_lag.Observe(std::chrono::duration<double>(now - it->second).count());
      finish_sent_.erase(it);
    }
  }
  std::lock_guard lock{wait_mu_};
  remember_outcome(id);
  if (const auto it = waiters_.find(id); it != waiters_.end()) {
    for (Respond& r : it->second) to_answer.emplace_back(it->first, std::move(r));
    waiters_.erase(it);
  }
}

void ClusterNode::Impl::answer(PgSession& db, std::vector<std::pair<JobId, Respond>> to_answer) {
  if (to_answer.empty()) return;
  std::vector<JobId> ids;
  for (const auto& [id, r] : to_answer) ids.push_back(id);
  std::unordered_map<JobId, Record> records;
  try {
    for (Record& rec : fetch_records(db, ids)) records.emplace(rec.id, std::move(rec));
  } catch (const PgError&) {
    std::lock_guard lock{wait_mu_};  // asked again once the listener has reconnected
    for (auto& [id, r] : to_answer) waiters_[id].push_back(std::move(r));
    throw;
  }
  std::vector<std::pair<JobId, Respond>> not_over;
  for (auto& [id, respond] : to_answer) {
    const auto it = records.find(id);
    if (it != records.end() && it->second.terminal) {
      respond(answer_of(it->second));
    } else if (it == records.end()) {
      respond(json_error(kStatusNotFound, "no such job", "id"));
    } else {
      not_over.emplace_back(id, std::move(respond));
    }
  }
  std::lock_guard lock{wait_mu_};
  for (auto& [id, r] : not_over) {
    recent_set_.erase(id);
    waiters_[id].push_back(std::move(r));
  }
}

// After a reconnect: answers every waiter whose job ended meanwhile.
void ClusterNode::Impl::answer_all_terminal(PgSession& db) {
  std::vector<std::pair<JobId, Respond>> all;
  {
    std::lock_guard lock{wait_mu_};
    for (auto& [id, list] : waiters_) {
      for (Respond& r : list) all.emplace_back(id, std::move(r));
    }
    waiters_.clear();
  }
  answer(db, std::move(all));
}

}  // namespace sandglass::daemon::cluster
