// The intake's second tries (node_impl.hpp): a session that broke is replaced and the request
// run once more on the new one before any 503; a submission whose statement may have committed
// unseen is looked up by its intake token first (migrations/functions.sql, "Admission and intake"),
// so it is answered with its job and never inserted twice.
#include "daemon/cluster/job_rows.hpp"
#include "daemon/cluster/node_impl.hpp"

#include <fmt/format.h>

#include <random>

namespace sandglass::daemon::cluster {

std::string ClusterNode::Impl::new_intake_token() {
  thread_local std::mt19937_64 bits{[] {
    std::random_device rd;
    return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  }()};
  const std::uint64_t hi = bits();
  const std::uint64_t lo = bits();
  return fmt::format("{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", hi >> 32, (hi >> 16) & 0xffff,
                     hi & 0xffff, lo >> 48, lo & 0xffff'ffff'ffffULL);
}

HttpResponse ClusterNode::Impl::not_served(const PgError& e) {
  if (!e.timed_out()) return unreachable();
  HttpResponse r = json_error(kStatusServiceUnavailable,
                              "the cluster database did not answer within its timeouts (a lock "
                              "or a long statement holds it up)",
                              "cluster");
  r.headers.emplace_back("Retry-After", "1");
  return r;
}

void ClusterNode::Impl::submit_batch(std::optional<PgSession>& db, std::vector<Pending>& batch) {
  std::optional<PgError> last;
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      ensure(db);
      insert(*db, batch);
      return;
    } catch (const PgError& e) {
      db_failed(e, "intake");
      last = e;
    }
    if (db && db->broken()) {
      // The statement may have committed with its answer lost, on either try: settle that on
      // a new session before the batch is sent again or answered 503.
      const PgSession::Backend old = db->backend();
      db.reset();
      try {
        ensure(db);
        settle_unseen(*db, old, batch);
      } catch (const PgError& e) {
        db_failed(e, "intake");
        last = e;
        break;
      }
    }
    if (last->timed_out()) break;  // a second wait would double the client's, to the same end
  }
  for (Pending& p : batch) {
    if (p.respond) std::exchange(p.respond, {})(not_served(*last));  // exactly once
  }
}

void ClusterNode::Impl::settle_unseen(PgSession& db, const PgSession::Backend& old,
                                      std::vector<Pending>& batch) {
  end_orphans(db, {old});
  std::vector<std::string> tokens;
  for (const Pending& p : batch) {
    if (p.respond) tokens.push_back(p.token);
  }
  if (tokens.empty()) return;
  const PgRows found = db.exec(
      "SELECT intake_token::text, id FROM sandglass_jobs WHERE intake_token = ANY ($1::uuid[])",
      {text_array(tokens)});
  std::unordered_map<std::string, JobId> ids;
  for (int r = 0; r < found.rows(); ++r) {
    ids.emplace(std::string{found.text(r, 0)}, static_cast<JobId>(found.integer(r, 1)));
  }
  for (Pending& p : batch) {
    const auto it = p.respond ? ids.find(p.token) : ids.end();
    if (it == ids.end()) continue;
    metrics_.intake_settled.Increment();
    // As a job it attached to: its row may have ended already (a claim at insert that the
    // take-back of lost claims queued again, or one retired since).
    try {
      admitted(db, p, it->second, "attached", p.respond);
    } catch (const PgError& e) {  // its row exists: not inserted again, whatever the answer
      db_failed(e, "intake");
      p.respond(not_served(e));
    }
    p.respond = {};
  }
}

void ClusterNode::Impl::run_task(std::optional<PgSession>& db, const QueuedTask& task) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      ensure(db);
      task.run(*db);
      return;
    } catch (const PgError& e) {
      db_failed(e, "intake");
      // Reads and cancels may run twice: a cancel asked again changes nothing.
      if (attempt == 0 && db && db->broken()) {
        db.reset();
        continue;
      }
      if (task.on_failure) task.on_failure(not_served(e));
      return;
    }
  }
}

void ClusterNode::Impl::announce_kinds(PgSession& db) {
  db.exec("UPDATE sandglass_nodes SET kinds = $2::text[] WHERE owner = $1", {owner(), served_array_});
}

}  // namespace sandglass::daemon::cluster
