// The listener thread of a cluster node (node_impl.hpp): one connection that LISTENs on
// sandglass_outcome (the run times every node shares, functions.sql, "Announced outcomes"), on
// this node's outcome channel (the outcomes of the jobs its clients wait for), on its
// incarnation's cancel channel (cancels of the jobs it runs: a new incarnation's channel
// replaces the old one's) and on sandglass_queued (wakes the claimer: sent only while some node
// is hungry, i.e. its last claim came back short, functions.sql, "Hungry nodes"). So it hears
// no cancel or outcome of jobs it neither runs nor waits for, beyond the shared samples. After a
// reconnect, and after a new LISTEN for cancels, it reads what the NOTIFYs it missed would have
// said. Every waiter registered here is for a job awaited by this node (its statement recorded
// the node in the row), so its NOTIFY comes; and should it not (lost with a connection, or the
// outcome fell out of the recent ones before its waiter came), each waiter's timer has the
// listener read the row (Waiters). The notify lag is observed for the outcomes this node hears.
#include "daemon/cluster/job_rows.hpp"
#include "daemon/cluster/node_impl.hpp"

#include <fmt/format.h>
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

namespace {

// The name of one of the node's channels (functions.sql, sandglass_channel).
std::string channel(PgSession& db, std::string_view what, const std::string& name) {
  return std::string{db.exec("SELECT sandglass_channel($1, $2)", {std::string{what}, name}).text(0, 0)};
}

}  // namespace

void ClusterNode::Impl::listener_loop(std::stop_token st) {
  std::optional<PgSession> db;
  bool resync = false;  // after a reconnect: notifications may have been missed
  std::string cancel_channel;        // of the incarnation whose cancels this session hears
  std::uint64_t listened_epoch = 0;  // that incarnation's epoch (0: none listened for yet)
  while (!st.stop_requested()) {
    try {
      if (!db || db->broken()) {
        ensure(db);
        db->exec(fmt::format("LISTEN sandglass_outcome; LISTEN \"{}\"; LISTEN sandglass_queued",
                             channel(*db, "outcome", node_)));
        cancel_channel.clear();
        listened_epoch = 0;
        if (resync) {  // what NOTIFYs said while it was away
          wake_claimer();
          answer_all_terminal(*db);
        }
        resync = true;
      }
      if (listened_epoch != lease_.epoch()) {
        listened_epoch = listen_for_cancels(*db, cancel_channel);
        listening_.store(true, std::memory_order_release);  // pairs with the wait in start()
        listening_.notify_all();
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

std::uint64_t ClusterNode::Impl::listen_for_cancels(PgSession& db, std::string& cancel_channel) {
  const NodeLease::Incarnation now = lease_.incarnation();
  if (now.owner.empty()) return now.epoch;  // between two incarnations: the next one is followed
  const std::string next = channel(db, "cancel", now.owner);
  db.exec(cancel_channel.empty() ? fmt::format("LISTEN \"{}\"", next)
                                 : fmt::format("UNLISTEN \"{}\"; LISTEN \"{}\"", cancel_channel, next));
  cancel_channel = next;
  // The cancels asked before this LISTEN (the NOTIFYs it did not hear). None before the node's
  // first one: nothing claims or inserts until it is done (start()).
  if (!listening_.load(std::memory_order_acquire)) return now.epoch;
  const PgRows asked = db.exec(
      "SELECT id FROM sandglass_jobs WHERE owner = $1 AND state = 'running' AND cancel_requested",
      {now.owner});
  for (int r = 0; r < asked.rows(); ++r) cancel_local(static_cast<JobId>(asked.integer(r, 0)));
  return now.epoch;
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
    // A cancel channel: this incarnation's, or an earlier one's NOTIFY sent before its UNLISTEN
    // (the owner tells them apart).
    if (n.channel.starts_with("sandglass_cancel_")) {  // "ID OWNER"
      const std::size_t sp = n.payload.find(' ');
      const auto id = parse_int(std::string_view{n.payload}.substr(0, sp));
      if (id && sp != std::string::npos && std::string_view{n.payload}.substr(sp + 1) == owner()) {
        cancel_local(static_cast<JobId>(*id));
      }
      continue;
    }
    // sandglass_outcome or this node's outcome channel: one line "ID KIND RUN_US" per job that
    // ended (functions.sql, sandglass_notify_outcomes), newline-separated.
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

// One outcome line "ID KIND RUN_US": gives another node's run time to the Runtime's estimate of
// the kind (a run of this node's is in it already: own_runs_), learns the notify lag, and moves
// the job's waiters to `to_answer`.
void ClusterNode::Impl::outcome_noticed(std::string_view line, TimePoint now,
                                        std::vector<Waiter>& to_answer) {
  const std::size_t sp = line.find(' ');
  const auto parsed = parse_int(line.substr(0, sp));
  if (!parsed || sp == std::string_view::npos) return;
  const JobId id = static_cast<JobId>(*parsed);
  const std::string_view rest = line.substr(sp + 1);
  const std::size_t sp2 = rest.rfind(' ');
  if (sp2 != std::string_view::npos) {
    const auto run_us = parse_int(rest.substr(sp2 + 1));
    // A run time (-1: the job never ran), and the line of another node's run.
    if (run_us && *run_us >= 0 && !own_runs_.heard(id) && sp2 > 0) {
      runtime_.record_run({.kind = std::string{rest.substr(0, sp2)}}, microseconds{*run_us});
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
