// Commit points of a cluster node's jobs (node_impl.hpp; the rule: functions.sql,
// sandglass_record_commits). A handler's JobContext::commit() calls record_commit(), which waits
// until the job's row says committed; the commit thread writes the marks of all the requests that
// wait together in one statement. So a lost node's row that says "not committed" means its handler
// never went past commit(), and the sweep may queue that job again; a job past its commit point is
// never run twice.
//
// A commit point that cannot be recorded is not passed: while the database cannot be reached
// the handler waits (its deadline still cancels it); a job asked to cancel, or no longer this
// owner's and attempt's, is refused and cancelled here (cause caller).
#include "daemon/cluster/node_impl.hpp"

#include <set>

namespace sandglass::daemon::cluster {

bool ClusterNode::Impl::record_commit(JobId id, int attempt, const JobContext& ctx) {
  auto request = std::make_shared<CommitRequest>();
  request->id = id;
  request->attempt = attempt;  // the handler's own: the row may hold a newer attempt by now
  const TimePoint asked = Clock::now();
  {
    std::lock_guard lock{commit_mu_};
    if (commits_closed_) {
      request->answer = CommitAnswer::refused;  // the node has left: nothing may commit here
    } else {
      commit_queue_.push_back(request);
    }
  }
  commit_cv_.notify_one();
  CommitAnswer answer = CommitAnswer::pending;
  {
    // Ends the wait when the job is cancelled meanwhile (its deadline, a caller, the drain).
    const CancelRegistration woken = ctx.token().on_cancel([this]() noexcept {
      { std::lock_guard lock{commit_mu_}; }  // the waiter is waiting, or sees cancelled()
      commit_done_cv_.notify_all();
    });
    std::unique_lock lock{commit_mu_};
    commit_done_cv_.wait(lock, [&] { return request->answer != CommitAnswer::pending || ctx.cancelled(); });
    answer = request->answer;
    if (answer == CommitAnswer::pending) {
      // Given up: the commit thread drops it unless it is sent already. One sent may still be
      // written: the row then says committed although the handler stops here, which only
      // keeps the job from running again.
      request->abandoned = true;
    }
  }
  switch (answer) {
    case CommitAnswer::recorded:
      metrics_.commit_points.Increment();
      metrics_.commit_latency.Observe(std::chrono::duration<double>(Clock::now() - asked).count());
      return true;
    case CommitAnswer::refused:  // cancelled by the commit thread (commit_loop)
      metrics_.commit_refused.Increment();
      return false;
    case CommitAnswer::pending: break;
  }
  return false;
}

void ClusterNode::Impl::commit_loop(std::stop_token st) {
  std::optional<PgSession> db;
  while (true) {
    std::vector<std::shared_ptr<CommitRequest>> batch;
    {
      std::unique_lock lock{commit_mu_};
      commit_cv_.wait(lock, st, [this] { return !commit_queue_.empty(); });
      if (st.stop_requested()) {
        // The runtime has drained before the node stops: no handler waits any more. Any that
        // did is refused rather than left waiting.
        for (auto& r : commit_queue_) r->answer = CommitAnswer::refused;
        commit_queue_.clear();
        commits_closed_ = true;
        commit_done_cv_.notify_all();
        return;
      }
      batch.swap(commit_queue_);
      std::erase_if(batch, [](const auto& r) { return r->abandoned; });
    }
    if (batch.empty()) continue;
    std::vector<std::int64_t> ids, attempts;
    for (const auto& r : batch) {
      ids.push_back(static_cast<std::int64_t>(r->id));
      attempts.push_back(r->attempt);
    }
    try {
      ensure(db);
      const PgRows marked = db->exec(
          "SELECT id, attempt FROM sandglass_record_commits($1, $2::bigint[], $3::int[])",
          {owner(), int_array(ids), int_array(attempts)});
      // Runs, not jobs: two attempts of one job in this batch (a stale run here and the newer
      // one) get the answer of their own attempt.
      std::set<RunId> recorded;
      for (int r = 0; r < marked.rows(); ++r) {
        recorded.insert({static_cast<JobId>(marked.integer(r, 0)), static_cast<int>(marked.integer(r, 1))});
      }
      std::vector<RunId> refused;
      {
        std::lock_guard lock{commit_mu_};
        for (auto& r : batch) {
          const RunId run{r->id, r->attempt};
          r->answer = recorded.contains(run) ? CommitAnswer::recorded : CommitAnswer::refused;
          if (r->answer == CommitAnswer::refused) refused.push_back(run);
        }
      }
      commit_done_cv_.notify_all();
      // On this thread, as any cancelling thread: the job's on_cancel callbacks run here, not on
      // the handler's thread inside its commit(). Only the refused attempt's run: a newer
      // attempt of the job here is not touched.
      for (const RunId& run : refused) cancel_local(run.id, run.attempt);
    } catch (const PgError& e) {
      db_failed(e, "recording commit points");
      db.reset();
      // Sent again after the back-off (written twice is the same mark), but for the requests
      // whose handlers give up meanwhile (dropped when taken).
      std::unique_lock lock{commit_mu_};
      commit_queue_.insert(commit_queue_.begin(), batch.begin(), batch.end());
      commit_cv_.wait_for(lock, st, kReconnectBackoff, [] { return false; });
    }
  }
}

}  // namespace sandglass::daemon::cluster
