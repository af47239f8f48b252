#include "daemon/cluster/cluster_node.hpp"

#include "daemon/cluster/job_rows.hpp"
#include "daemon/cluster/migrations.hpp"
#include "daemon/cluster/node_impl.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <algorithm>

namespace sandglass::daemon::cluster {
namespace {

// This host's name and the port of `listen_address` (HOST:PORT, the bound port): one name per
// node of a cluster, where the listen address is often 0.0.0.0:PORT on every host.
std::string default_node_name(const std::string& listen_address) {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') return listen_address;
  return std::string{host} + listen_address.substr(listen_address.rfind(':'));
}

}  // namespace
ClusterNode::Impl::Impl(const DaemonConfig& config, const KindRegistry& kinds, Runtime& runtime)
    : config_{*config.cluster}, budget_{config.runtime.budget}, kinds_{kinds},
      runtime_{runtime}, workers_{config.runtime.workers},
      claim_ahead_{claim_ahead_for(config.runtime.workers, config.runtime.capacity,
                                   config.cluster->claim_ahead)},
      capacity_{config.runtime.capacity},
      keep_records_{std::max<std::chrono::milliseconds>(config.records.keep, kLeastKeep)},
      records_max_count_{config.records.max_count},
      lease_{{.lease = config.cluster->lease, .margin = config.cluster->lease / 4}} {
  if (config_.kinds.empty()) {
    served_ = kinds_.names();
  } else {
    for (const std::string& k : config_.kinds) {
      if (kinds_.find(k) == nullptr) {
        throw ConfigError{"cluster.kinds", fmt::format("names kind \"{}\", which this daemon does not have", k)};
      }
      served_.push_back(k);
    }
  }
  served_array_ = text_array(served_);
  PgSession db = PgSession::open(config_.conninfo);
  const MigrationReport report = migrate(db);
  if (!report.applied.empty()) {
    spdlog::info("cluster database at {}: schema migrated from version {} to {}", db.server(),
                 report.from_version, report.to_version);
  }
  db.limit(session_timeouts());  // the migration ran without them
  main_db_.emplace(std::move(db));
}

void ClusterNode::Impl::start(const std::string& listen_address) {
  node_ = config_.node.empty() ? default_node_name(listen_address) : config_.node;
  // A live incarnation of this name refuses the start (ConfigError); earlier ones are gone:
  // their jobs are swept (sandglass_join).
  join(*main_db_);
  db_ok_.store(true, std::memory_order_relaxed);
  listener_ = std::jthread{[this](std::stop_token st) { listener_loop(st); }};
  // No job is inserted before the listener listens: a waiter can then rely on the NOTIFY.
  listening_.wait(false, std::memory_order_acquire);
  for (std::size_t i = 0; i < kIntakeThreads; ++i) {
    intake_.emplace_back([this](std::stop_token st) { intake_loop(st); });
  }
  heartbeat_ = std::jthread{[this](std::stop_token st) { heartbeat_loop(st); }};
  maintenance_ = std::jthread{[this](std::stop_token st) { maintenance_loop(st); }};
  claimer_ = std::jthread{[this](std::stop_token st) { claimer_loop(st); }};
  committer_ = std::jthread{[this](std::stop_token st) { commit_loop(st); }};
  started_ = true;
  spdlog::info("cluster node {} joined (owner {}), claiming kinds: {}", node_, owner(),
               fmt::join(served_, ", "));
}

void ClusterNode::Impl::stop_claiming() {
  claims_closing_.store(true, std::memory_order_relaxed);
  std::unique_lock lock{claim_run_mu_};  // waits for the claims in flight
  claiming_stopped_ = true;
}

void ClusterNode::Impl::stop(Duration flush_for) {
  if (!started_ || stopped_) return;
  stop_claiming();
  // The runtime has drained: every local job has its outcome queued here; the claimer, which
  // claims no more, writes them.
  {
    std::unique_lock lock{claim_mu_};
    claim_cv_.wait_for(lock, flush_for, [this] { return outcomes_.empty() && !outcomes_in_flight_; });
  }
  claimer_.request_stop();
  claim_cv_.notify_all();
  claimer_ = {};
  // Claimed jobs the drain deadline removed unstarted go back to the queue, while this node's
  // owner still holds them.
  try {
    ensure(main_db_);
    give_back(*main_db_);
  } catch (const PgError& e) {
    db_failed(e, "giving back unstarted jobs");
  }
  heartbeat_ = {};    // requests stop and joins
  maintenance_ = {};
  committer_ = {};  // requests stop and joins (the runtime has drained: no handler waits)
  for (auto& t : intake_) t.request_stop();
  intake_cv_.notify_all();
  intake_.clear();
  {
    std::lock_guard lock{intake_mu_};
    for (Pending& p : submit_queue_) p.respond(unreachable());
    for (std::vector<Pending>& batch : batch_queue_) {
      for (Pending& p : batch) p.respond(unreachable());
    }
    batch_queue_.clear();
    for (QueuedTask& t : intake_queue_) {
      if (t.on_failure) t.on_failure(unreachable());
    }
    submit_queue_.clear();
    intake_queue_.clear();
  }
  listener_.request_stop();
  listener_wake_.wake();
  listener_ = {};
  // Waiters of jobs that run elsewhere: the job goes on; this node no longer follows it.
  for (Waiter& w : waiters_.take_all()) {
    HttpResponse r = json_error(kStatusServiceUnavailable,
                                fmt::format("this node is shutting down; job {} goes on: ask "
                                            "another node for GET /v1/jobs/{}", w.id, w.id),
                                "id");
    r.headers.emplace_back("Retry-After", "1");
    w.respond(std::move(r));
  }
  try {
    if (main_db_ && !main_db_->broken()) {
      main_db_->exec("DELETE FROM sandglass_nodes WHERE owner = $1", {owner()});
    }
  } catch (const PgError& e) {
    spdlog::warn("cluster: leaving: {}", e.what());
  }
  stopped_ = true;
  spdlog::info("cluster node {} left", node_);
}

std::string ClusterNode::Impl::metrics_text() const {
  return metrics_.text(db_ok_.load(std::memory_order_relaxed), held_.load(std::memory_order_relaxed));
}

// Opens `db` if it has no usable session. Throws PgError.
void ClusterNode::Impl::ensure(std::optional<PgSession>& db) {
  if (!db || db->broken()) {
    db.reset();
    db.emplace(PgSession::open(config_.conninfo, session_timeouts()));
  }
  // Named after the current incarnation, also a session opened by an earlier one: a sweep that
  // judges this incarnation lost ends its sessions.
  if (db->label() == lease_.epoch()) return;
  const NodeLease::Incarnation now = lease_.incarnation();
  if (now.owner.empty()) return;
  db->exec("SELECT set_config('application_name', sandglass_session_name($1), false)", {now.owner});
  db->set_label(now.epoch);
}

void ClusterNode::Impl::db_failed(const PgError& e, std::string_view where) {
  metrics_.db_errors.Increment();
  spdlog::warn("cluster {}: {}", where, e.what());
}

HttpResponse ClusterNode::Impl::unreachable() {
  HttpResponse r = json_error(kStatusServiceUnavailable, "the cluster database cannot be reached",
                              "cluster");
  r.headers.emplace_back("Retry-After", "1");
  return r;
}

ClusterNode::ClusterNode(const DaemonConfig& config, const KindRegistry& kinds, Runtime& runtime)
    : impl_{std::make_unique<Impl>(config, kinds, runtime)} {}
ClusterNode::~ClusterNode() = default;
void ClusterNode::start(const std::string& listen_address) { impl_->start(listen_address); }
void ClusterNode::observe_runs(std::function<void(const Outcome&)> observer) {
  impl_->observe_runs(std::move(observer));
}
void ClusterNode::stop_claiming() { impl_->stop_claiming(); }
void ClusterNode::stop(Duration flush_for) { impl_->stop(flush_for); }
ClusterNode::ClientGone ClusterNode::submit(JobRequest request, TimePoint arrived_at, Respond respond) {
  return impl_->submit(std::move(request), arrived_at, std::move(respond));
}
void ClusterNode::submit_many(std::vector<JobRequest> requests, TimePoint arrived_at,
                              std::function<void(std::vector<HttpResponse>)> answered) {
  impl_->submit_many(std::move(requests), arrived_at, std::move(answered));
}
void ClusterNode::job_record(JobId id, bool wait, Respond respond) {
  impl_->job_record(id, wait, std::move(respond));
}
void ClusterNode::cancel(JobId id, Respond respond) { impl_->cancel(id, std::move(respond)); }
std::string ClusterNode::metrics_text() const { return impl_->metrics_text(); }
bool ClusterNode::ready() const noexcept { return impl_->ready(); }
const std::string& ClusterNode::node_name() const noexcept { return impl_->node_name(); }

std::string migrate_only(const ClusterConfig& config) {
  PgSession db = PgSession::open(config.conninfo);
  const MigrationReport r = migrate(db, ApplyFunctions::always);
  if (r.applied.empty()) {
    return fmt::format("cluster database at {}: schema is up to date (version {})\n", db.server(),
                       r.to_version);
  }
  return fmt::format("cluster database at {}: schema migrated from version {} to {} ({})\n",
                     db.server(), r.from_version, r.to_version, fmt::join(r.applied, ", "));
}

}  // namespace sandglass::daemon::cluster
