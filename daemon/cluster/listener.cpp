// The listener thread of a cluster node (node_impl.hpp): one connection that LISTENs on
// sandglass_outcome (answers this node's waiters, learns run times), sandglass_cancel (cancels
// a local job) and sandglass_queued (wakes the claimer: sent only while some node is hungry,
// i.e. its last claim came back short, functions.sql, "Hungry nodes"); after a reconnect it reads
// what the NOTIFYs it missed would have said. An outcome is announced only when its job is awaited
// or its node shares that batch's run times (functions.sql, "Announced outcomes"); every waiter
// registered here is for an awaited job (its submission's statement marked it), so its NOTIFY
// comes; and should it not (lost with a connection, or the outcome fell out of the recent ones
// before its waiter came), each waiter's timer has the listener read the row (Waiters). The notify
// lag is observed for this node's announced outcomes only.
#include "daemon/cluster/job_rows.hpp"
#include "daemon/cluster/node_impl.hpp"

#include <spdlog/spdlog.h>

namespace sandglass::daemon::cluster {

using std::chrono::microseconds;

void ClusterNode::Impl::add_waiter(JobId id, const Respond& respond, TimePoint due,
                                   std::function<HttpResponse(const Record&)> answer_from_row) {
  // Its outcome's NOTIFY came before this waiter (late), or its due time may come before the
  // listener's next wake-up (at most poll_ms away): the listener looks again now.
  const bool late = waiters_.add(id, respond, due, std::move(answer_from_row));
  if (late || due < Deadline::after(config_.poll).time_point()) {
    listener_wake_.wake();
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
      const TimePoint until = std::min(Deadline::after(config_.poll).time_point(), waiters_.next_due());
      const auto notes = db->wait_notifications(Deadline::at(until), listener_wake_.fd());
      listener_wake_.clear();
      handle_notifications(*db, notes);
      answer_due(*db);
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
  std::vector<Waiter> to_answer = waiters_.take_late();
  bool queued = false;
  const TimePoint now = Clock::now();
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
    // One line "ID KIND RUN_US" per job that ended (functions.sql, sandglass_notify_outcomes),
    // newline-separated.
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
                                        std::vector<Waiter>& to_answer) {
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
  for (Waiter& w : waiters_.noticed(id)) to_answer.push_back(std::move(w));
}

std::size_t ClusterNode::Impl::answer(PgSession& db, std::vector<Waiter> to_answer) {
  if (to_answer.empty()) return 0;
  std::vector<JobId> ids;
  for (const Waiter& w : to_answer) ids.push_back(w.id);
  std::unordered_map<JobId, Record> records;
  try {
    for (Record& rec : fetch_records(db, ids)) records.emplace(rec.id, std::move(rec));
  } catch (const PgError&) {
    // Asked again once the listener has reconnected (a resync) or at their due time.
    waiters_.put_back(std::move(to_answer), Clock::now(), Duration::zero());
    throw;
  }
  std::size_t answered = 0;
  std::vector<Waiter> not_over;
  const TimePoint now = Clock::now();
  for (Waiter& w : to_answer) {
    const auto it = records.find(w.id);
    if (it != records.end() && w.answer_from_row && (it->second.terminal || w.due <= now)) {
      w.respond(w.answer_from_row(it->second));
      ++answered;
    } else if (it != records.end() && it->second.terminal) {
      w.respond(answer_of(it->second));
      ++answered;
    } else if (it == records.end()) {
      w.respond(json_error(kStatusNotFound, "no such job", "id"));
      ++answered;
    } else {
      not_over.push_back(std::move(w));
    }
  }
  // The sweep ends the job of a lost node within a lease: read it again then. (A reader is
  // read again at its own due time.)
  waiters_.put_back(std::move(not_over), now, config_.lease);
  return answered;
}

// After a reconnect: answers every waiter whose job ended meanwhile.
void ClusterNode::Impl::answer_all_terminal(PgSession& db) { answer(db, waiters_.take_all()); }

void ClusterNode::Impl::answer_due(PgSession& db) {
  std::vector<Waiter> due = waiters_.take_due(Clock::now());
  if (due.empty()) return;
  metrics_.waits_timed.Increment(static_cast<double>(answer(db, std::move(due))));
}

}  // namespace sandglass::daemon::cluster
