#include "daemon/cluster/cluster_node.hpp"

#include "daemon/cluster/migrations.hpp"
#include "daemon/cluster/pg_session.hpp"
#include "daemon/http/http_status.hpp"

#include <sandglass/service_time_estimator.hpp>

#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <fmt/format.h>
#include <prometheus/counter.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <spdlog/spdlog.h>

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace sandglass::daemon::cluster {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

constexpr std::size_t kIntakeThreads = 2;
constexpr milliseconds kCommitPoll{5};          // how often commit points are looked for
constexpr microseconds kClaimGather{1000};      // most a claim waits for more workers to free up
constexpr milliseconds kReconnectBackoff{200};  // between attempts to reach the database
constexpr std::size_t kFinishBatch = 512;       // most outcomes one statement writes
constexpr std::size_t kSubmitBatch = 128;       // most submissions one statement inserts
constexpr std::size_t kRecentOutcomes = 8192;   // outcome ids remembered for late waiters

// True on the claimer thread while it holds claim_mu_ (see wake_claimer).
thread_local bool t_in_claim = false;

std::int64_t us_of(Duration d) { return std::chrono::duration_cast<microseconds>(d).count(); }
std::int64_t ms_of(std::int64_t us) { return us / 1000; }

std::string json_text(const boost::json::object& o) { return boost::json::serialize(o); }

HttpResponse json_error(unsigned status, std::string_view message, std::string_view field = {}) {
  boost::json::object body{{"error", message}};
  if (!field.empty()) body["field"] = field;
  return {.status = status, .body = json_text(body)};
}

boost::json::value result_value(std::string_view text) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(text, ec);
  if (ec) return boost::json::string{text};
  return v;
}

std::optional<std::int64_t> parse_int(std::string_view text) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return v;
}

// The columns `record_of` reads, in its order.
constexpr std::string_view kRecordColumns =
    "id, kind, state, outcome_state, reason, cause, committed, result, error, node_ran, attempt,"
    " priority, budget_us,"
    " floor(extract(epoch FROM coalesce(claimed_at, finished_at, clock_timestamp()) - created_at)"
    " * 1000000)::bigint,"
    " coalesce(run_us, CASE WHEN state = 'running' THEN"
    " floor(extract(epoch FROM clock_timestamp() - claimed_at) * 1000000)::bigint END),"
    " floor(extract(epoch FROM deadline - coalesce(finished_at, clock_timestamp())) * 1000000)::bigint,"
    " cancel_requested";

struct Record {
  JobId id = 0;
  bool terminal = false;
  HttpStatus status{};  // for a terminal record answered to a waiter
  std::string json;
};

// One row of kRecordColumns as the job record the daemon answers with (the local record's
// fields, and "node": the node that ran it, "attempt", "priority").
Record record_of(const PgRows& rows, int r) {
  Record rec;
  rec.id = static_cast<JobId>(rows.integer(r, 0));
  boost::json::object o;
  o["id"] = rec.id;
  o["kind"] = rows.text(r, 1);
  const std::string_view state = rows.text(r, 2);
  rec.terminal = state == "done";
  o["state"] = rec.terminal ? rows.text(r, 3) : state;
  Reason reason = Reason::ok;
  CancelCause cause = CancelCause::none;
  if (rows.null(r, 4)) {
    o["reason"] = nullptr;
  } else {
    o["reason"] = rows.text(r, 4);
    reason = reason_from_string(rows.text(r, 4)).value_or(Reason::handler_error);
  }
  if (!rows.null(r, 5)) {
    o["cause"] = rows.text(r, 5);
    cause = cancel_cause_from_string(rows.text(r, 5)).value_or(CancelCause::none);
  } else if (!rec.terminal && rows.boolean(r, 16)) {
    o["cause"] = "caller";  // asked to cancel; not over yet
  }
  o["committed"] = rows.boolean(r, 6);
  if (!rows.null(r, 7) && !rows.text(r, 7).empty()) o["result"] = result_value(rows.text(r, 7));
  if (!rows.null(r, 8) && !rows.text(r, 8).empty()) o["error"] = rows.text(r, 8);
  if (rows.null(r, 9)) {
    o["node"] = nullptr;
  } else {
    o["node"] = rows.text(r, 9);
  }
  o["attempt"] = rows.integer(r, 10);
  o["priority"] = to_string(static_cast<Priority>(rows.integer(r, 11)));
  o["timings"] = {{"budget_ms", ms_of(rows.integer(r, 12))},
                  {"queue_ms", ms_of(rows.integer(r, 13))},
                  {"run_ms", ms_of(rows.integer(r, 14))},
                  {"remaining_ms", ms_of(rows.integer(r, 15))}};
  rec.status = http_status_of(reason, cause);
  rec.json = json_text(o);
  return rec;
}

std::vector<Record> fetch_records(PgSession& db, const std::vector<JobId>& ids) {
  std::vector<std::int64_t> as_int(ids.begin(), ids.end());
  const PgRows rows = db.exec(
      fmt::format("SELECT {} FROM sandglass_jobs WHERE id = ANY ($1::bigint[])", kRecordColumns),
      {int_array(as_int)});
  std::vector<Record> out;
  for (int r = 0; r < rows.rows(); ++r) out.push_back(record_of(rows, r));
  return out;
}

HttpResponse answer_of(const Record& rec) {
  HttpResponse r{.status = rec.status.code, .body = rec.json};
  if (rec.status.retry_after) r.headers.emplace_back("Retry-After", "1");
  return r;
}

std::string random_suffix() {
  std::random_device rd;
  return fmt::format("{:08x}", rd());
}

// An eventfd to wake a thread out of poll().
class WakeFd {
 public:
  WakeFd() : fd_{::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)} {
    if (fd_ < 0) throw std::system_error{errno, std::generic_category(), "eventfd"};
  }
  ~WakeFd() { ::close(fd_); }
  WakeFd(const WakeFd&) = delete;
  WakeFd& operator=(const WakeFd&) = delete;
  int fd() const noexcept { return fd_; }
  void wake() noexcept {
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto n = ::write(fd_, &one, sizeof one);
  }
  void clear() noexcept {
    std::uint64_t value = 0;
    [[maybe_unused]] const auto n = ::read(fd_, &value, sizeof value);
  }

 private:
  int fd_;
};

}  // namespace

class ClusterNode::Impl {
 public:
  Impl(const DaemonConfig& config, const KindRegistry& kinds, Runtime& runtime)
      : config_{*config.cluster}, budget_{config.runtime.budget}, kinds_{kinds},
        runtime_{runtime}, workers_{config.runtime.workers}, capacity_{config.runtime.capacity},
        estimator_options_{.quantile = config.runtime.estimate_quantile,
                           .window = config.runtime.estimate_window,
                           .max_age = config.runtime.estimate_max_age,
                           .age_in_runs = config.runtime.estimate_age_in_runs},
        claims_{prometheus::BuildCounter()
                    .Name("sandglass_cluster_claims_total")
                    .Help("Claim statements run by this node")
                    .Register(*registry_)
                    .Add({})},
        claimed_{prometheus::BuildCounter()
                     .Name("sandglass_cluster_claimed_jobs_total")
                     .Help("Jobs this node claimed")
                     .Register(*registry_)
                     .Add({})},
        retired_{prometheus::BuildCounter()
                     .Name("sandglass_cluster_retired_at_claim_total")
                     .Help("Queued jobs ended by this node's claims: expired or too late to start")
                     .Register(*registry_)
                     .Add({})},
        stale_{prometheus::BuildCounter()
                   .Name("sandglass_cluster_stale_outcomes_total")
                   .Help("Outcomes discarded by fencing: the job was no longer this node's")
                   .Register(*registry_)
                   .Add({})},
        reclaimed_{prometheus::BuildCounter()
                       .Name("sandglass_cluster_reclaimed_total")
                       .Help("Jobs of lost nodes queued again by this node's sweeps")
                       .Register(*registry_)
                       .Add({})},
        lost_{prometheus::BuildCounter()
                  .Name("sandglass_cluster_node_lost_total")
                  .Help("Jobs of lost nodes ended node_lost by this node's sweeps")
                  .Register(*registry_)
                  .Add({})},
        db_errors_{prometheus::BuildCounter()
                       .Name("sandglass_cluster_db_errors_total")
                       .Help("Statements or connections to the cluster database that failed")
                       .Register(*registry_)
                       .Add({})},
        claim_latency_{prometheus::BuildHistogram()
                           .Name("sandglass_cluster_claim_seconds")
                           .Help("Time of one claim statement, as this node waits for it")
                           .Register(*registry_)
                           .Add({}, prometheus::Histogram::BucketBoundaries{
                                        0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05,
                                        0.1, 0.5})},
        batch_size_{prometheus::BuildHistogram()
                        .Name("sandglass_cluster_claim_batch_size")
                        .Help("Jobs one claim statement took")
                        .Register(*registry_)
                        .Add({}, prometheus::Histogram::BucketBoundaries{0, 1, 2, 4, 8, 16, 32,
                                                                         64, 128})},
        notify_lag_{prometheus::BuildHistogram()
                        .Name("sandglass_cluster_notify_lag_seconds")
                        .Help("From writing an outcome to receiving its NOTIFY, on this node")
                        .Register(*registry_)
                        .Add({}, prometheus::Histogram::BucketBoundaries{
                                     0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5})} {
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
    PgSession db = PgSession::open(config_.conninfo);
    const MigrationReport report = migrate(db);
    if (!report.applied.empty()) {
      spdlog::info("cluster database at {}: schema migrated from version {} to {}", db.server(),
                   report.from_version, report.to_version);
    }
    main_db_.emplace(std::move(db));
  }

  ~Impl() { stop(Duration::zero()); }

  // ---- lifecycle ----------------------------------------------------------------------------

  void start(const std::string& listen_address) {
    node_ = config_.node.empty() ? listen_address : config_.node;
    owner_ = node_ + "/" + random_suffix();
    PgSession& db = *main_db_;
    db.exec("INSERT INTO sandglass_nodes (owner, node, workers, capacity) VALUES ($1, $2, $3, $4)",
            {owner_, node_, std::to_string(workers_), std::to_string(capacity_)});
    // An earlier incarnation of this node (killed, restarted) is gone: its jobs are swept now.
    db.exec("UPDATE sandglass_nodes SET heartbeat_at = '-infinity' WHERE node = $1 AND owner <> $2",
            {node_, owner_});
    db_ok_.store(true, std::memory_order_relaxed);
    listener_ = std::jthread{[this](std::stop_token st) { listener_loop(st); }};
    // No job is inserted before the listener listens: a waiter can then rely on the NOTIFY.
    listening_.wait(false, std::memory_order_acquire);
    for (std::size_t i = 0; i < kIntakeThreads; ++i) {
      intake_.emplace_back([this](std::stop_token st) { intake_loop(st); });
    }
    finisher_ = std::jthread{[this](std::stop_token st) { finisher_loop(st); }};
    heartbeat_ = std::jthread{[this](std::stop_token st) { heartbeat_loop(st); }};
    claimer_ = std::jthread{[this](std::stop_token st) { claimer_loop(st); }};
    started_ = true;
    spdlog::info("cluster node {} joined (owner {}), claiming kinds: {}", node_, owner_,
                 fmt::join(served_, ", "));
  }

  void stop_claiming() {
    std::lock_guard lock{claim_mu_};
    claiming_stopped_ = true;
  }

  void stop(Duration flush_for) {
    if (!started_ || stopped_) return;
    stop_claiming();
    claimer_.request_stop();
    claim_cv_.notify_all();
    claimer_ = {};
    // The runtime has drained: every local job has its outcome queued here.
    {
      std::unique_lock lock{finish_mu_};
      finish_cv_.wait_for(lock, flush_for, [this] { return finish_queue_.empty() && !finishing_; });
    }
    finisher_.request_stop();
    finish_cv_.notify_all();
    finisher_ = {};
    heartbeat_.request_stop();
    heartbeat_cv_.notify_all();
    heartbeat_ = {};
    for (auto& t : intake_) t.request_stop();
    intake_cv_.notify_all();
    intake_.clear();
    {
      std::lock_guard lock{intake_mu_};
      for (Pending& p : submit_queue_) p.respond(unreachable());
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
    std::unordered_map<JobId, std::vector<Respond>> waiters;
    {
      std::lock_guard lock{wait_mu_};
      waiters.swap(waiters_);
    }
    for (auto& [id, list] : waiters) {
      for (Respond& respond : list) {
        HttpResponse r = json_error(kStatusServiceUnavailable,
                                    fmt::format("this node is shutting down; job {} goes on: ask "
                                                "another node for GET /v1/jobs/{}", id, id),
                                    "id");
        r.headers.emplace_back("Retry-After", "1");
        respond(std::move(r));
      }
    }
    try {
      if (main_db_ && !main_db_->broken()) {
        main_db_->exec("DELETE FROM sandglass_nodes WHERE owner = $1", {owner_});
      }
    } catch (const PgError& e) {
      spdlog::warn("cluster: leaving: {}", e.what());
    }
    stopped_ = true;
    spdlog::info("cluster node {} left", node_);
  }

  // ---- API ----------------------------------------------------------------------------------

  struct Submission {
    std::mutex mu;
    std::optional<JobId> id;  // guarded by mu
    bool gone = false;        // guarded by mu
  };

  struct Pending {
    JobRequest request;
    TimePoint arrived_at;
    Respond respond;  // emptied once answered
    std::shared_ptr<Submission> state;
  };

  ClientGone submit(JobRequest req, TimePoint arrived_at, Respond respond) {
    auto state = std::make_shared<Submission>();
    const bool wait = req.wait;
    const bool keyed = !req.idempotency_key.empty();
    {
      std::lock_guard lock{intake_mu_};
      submit_queue_.push_back(Pending{std::move(req), arrived_at, std::move(respond), state});
    }
    intake_cv_.notify_one();
    if (!wait) return {};
    return [this, state, keyed] {
      std::optional<JobId> id;
      {
        std::lock_guard lock{state->mu};
        state->gone = true;
        id = state->id;
      }
      if (id) client_left(*id, keyed);
    };
  }

  void job_record(JobId id, Respond respond) {
    post([id, respond](PgSession& db) {
      const std::vector<Record> found = fetch_records(db, {id});
      if (found.empty()) {
        respond(json_error(kStatusNotFound, "no such job", "id"));
      } else {
        respond({.body = found.front().json});
      }
    }, respond);
  }

  void cancel(JobId id, Respond respond) {
    post([this, id, respond](PgSession& db) {
      db.exec("SELECT sandglass_cancel($1, $2)", {node_, std::to_string(id)});
      const std::vector<Record> found = fetch_records(db, {id});
      if (found.empty()) {
        respond(json_error(kStatusNotFound, "no such job", "id"));
      } else {
        respond({.body = found.front().json});
      }
    }, respond);
  }

  std::string metrics_text() const {
    std::string text = prometheus::TextSerializer{}.Serialize(registry_->Collect());
    text += fmt::format(
        "# HELP sandglass_cluster_database_up Whether the last heartbeat reached the cluster "
        "database\n# TYPE sandglass_cluster_database_up gauge\nsandglass_cluster_database_up {}\n",
        db_ok_.load(std::memory_order_relaxed) ? 1 : 0);
    text += fmt::format(
        "# HELP sandglass_cluster_held_jobs Claimed jobs this node holds (running or about to)\n"
        "# TYPE sandglass_cluster_held_jobs gauge\nsandglass_cluster_held_jobs {}\n",
        held_.load(std::memory_order_relaxed));
    return text;
  }

  bool ready() const noexcept { return db_ok_.load(std::memory_order_relaxed); }
  const std::string& node_name() const noexcept { return node_; }

 private:
  using Task = std::function<void(PgSession&)>;
  struct QueuedTask {
    Task run;
    Respond on_failure;  // answers 503 when the database cannot be reached; may be empty
  };

  void post(Task run, Respond on_failure = {}) {
    {
      std::lock_guard lock{intake_mu_};
      intake_queue_.push_back({std::move(run), std::move(on_failure)});
    }
    intake_cv_.notify_one();
  }

  // Opens `db` if it has no usable session. Throws PgError.
  void ensure(std::optional<PgSession>& db) {
    if (db && !db->broken()) return;
    db.reset();
    db.emplace(PgSession::open(config_.conninfo));
  }

  void db_failed(const PgError& e, std::string_view where) {
    db_errors_.Increment();
    spdlog::warn("cluster {}: {}", where, e.what());
  }

  static HttpResponse unreachable() {
    HttpResponse r = json_error(kStatusServiceUnavailable, "the cluster database cannot be reached",
                                "cluster");
    r.headers.emplace_back("Retry-After", "1");
    return r;
  }

  void intake_loop(std::stop_token st) {
    std::optional<PgSession> db;
    std::vector<Pending> submits;
    while (!st.stop_requested()) {
      QueuedTask task;
      {
        std::unique_lock lock{intake_mu_};
        intake_cv_.wait(lock, st, [this] { return !intake_queue_.empty() || !submit_queue_.empty(); });
        // Submissions waiting together go in one statement; reads and cancels one by one.
        while (!submit_queue_.empty() && submits.size() < kSubmitBatch) {
          submits.push_back(std::move(submit_queue_.front()));
          submit_queue_.pop_front();
        }
        if (submits.empty()) {
          if (intake_queue_.empty()) continue;
          task = std::move(intake_queue_.front());
          intake_queue_.pop_front();
        }
      }
      if (!submits.empty()) {
        // A second try on a live session: the first may have lost a serialization race.
        for (int attempt = 0; attempt < 2 && !submits.empty(); ++attempt) {
          try {
            ensure(db);
            insert(*db, submits);
            break;
          } catch (const PgError& e) {
            db_failed(e, "intake");
            if (attempt == 0 && db && !db->broken()) continue;
            for (Pending& p : submits) {
              if (p.respond) std::exchange(p.respond, {})(unreachable());  // exactly once
            }
            break;
          }
        }
        submits.clear();
        continue;
      }
      try {
        ensure(db);
        task.run(*db);
      } catch (const PgError& e) {
        db_failed(e, "intake");
        if (task.on_failure) task.on_failure(unreachable());
      }
    }
  }

  // The kind's central and tail estimates, from the outcomes of every node (each outcome's
  // NOTIFY carries its run time); zero when none are known.
  std::pair<Duration, Duration> estimates(const std::string& kind) {
    std::lock_guard lock{estimates_mu_};
    const auto it = estimators_.find(kind);
    if (it == estimators_.end()) return {};
    it->second.age(Clock::now());
    return {it->second.central(), it->second.tail()};
  }

  void record_run(const std::string& kind, Duration run) {
    std::lock_guard lock{estimates_mu_};
    auto it = estimators_.find(kind);
    if (it == estimators_.end()) it = estimators_.emplace(kind, ServiceTimeEstimator{estimator_options_}).first;
    it->second.record(run);
  }

  // POST /v1/jobs on an intake thread, for the submissions that waited together: the budget
  // left becomes each row's deadline by the database's clock; admission and insert are one
  // statement for all of them (sandglass_submit_many). Each one answered gets an empty respond.
  void insert(PgSession& db, std::vector<Pending>& batch) {
    std::vector<std::optional<std::string>> kinds, args, keys, fingerprints;
    std::vector<std::int64_t> priorities, remaining, budgets, works, tails;
    std::vector<std::size_t> sent;  // indexes into batch
    for (std::size_t i = 0; i < batch.size(); ++i) {
      if (!batch[i].respond) continue;  // answered on an earlier try
      const JobRequest& req = batch[i].request;
      const Duration budget = budget_.grant(req.budget).budget;
      const Duration left =
          budget - std::min(budget, budget_.reserve) - (Clock::now() - batch[i].arrived_at);
      if (left < budget_.min_useful) {
        std::exchange(batch[i].respond, {})(rejection(
            req.kind, Reason::budget_too_small, "less budget left than the minimum useful duration"));
        continue;
      }
      const auto [work, tail] = estimates(req.kind);
      const bool keyed = !req.idempotency_key.empty();
      kinds.emplace_back(req.kind);
      args.emplace_back(boost::json::serialize(req.args));
      keys.push_back(keyed ? std::optional<std::string>{req.idempotency_key} : std::nullopt);
      fingerprints.push_back(
          keyed ? std::optional<std::string>{json_text({{"kind", req.kind},
                                                         {"args", req.args},
                                                         {"priority", to_string(req.priority)}})}
                : std::nullopt);
      priorities.push_back(static_cast<int>(req.priority));
      remaining.push_back(us_of(left));
      budgets.push_back(us_of(budget));
      works.push_back(us_of(work));
      tails.push_back(us_of(tail));
      sent.push_back(i);
    }
    if (sent.empty()) return;
    const PgRows rows = db.exec(
        "SELECT ord, job_id, verdict FROM sandglass_submit_many($1, $2::text[], $3::text[], "
        "$4::smallint[], $5::text[], $6::text[], $7::bigint[], $8::bigint[], $9::bigint[], "
        "$10::bigint[], $11)",
        {node_, text_array(kinds), text_array(args), int_array(priorities), text_array(keys),
         text_array(fingerprints), int_array(remaining), int_array(budgets), int_array(works),
         int_array(tails), std::to_string(config_.lease.count())});
    for (int r = 0; r < rows.rows(); ++r) {
      Pending& p = batch[sent[static_cast<std::size_t>(rows.integer(r, 0) - 1)]];
      Respond respond = std::exchange(p.respond, {});
      try {
        admitted(db, p, static_cast<JobId>(rows.integer(r, 1)), rows.text(r, 2), respond);
      } catch (const PgError& e) {
        db_failed(e, "intake");
        respond(unreachable());
      }
    }
  }

  void admitted(PgSession& db, const Pending& p, JobId id, std::string_view verdict,
                const Respond& respond) {
    const JobRequest& req = p.request;
    if (verdict == "queue_full" || verdict == "deadline_implausible") {
      respond(rejection(req.kind, verdict == "queue_full" ? Reason::queue_full : Reason::deadline_implausible,
                        verdict == "queue_full" ? "the cluster's queue is full"
                                                : "the work queued ahead in the cluster cannot finish in time"));
      return;
    }
    const bool keyed = !req.idempotency_key.empty();
    if (verdict == "conflict") {
      respond(json_error(kStatusConflict,
                         fmt::format("idempotency_key names job {}, submitted with a different "
                                     "kind, args or priority", id),
                         "idempotency_key"));
      return;
    }
    if (verdict == "attached") {
      // Its outcome may be long written, before this node listened: read it first. (Ended
      // after this read, its NOTIFY reaches the waiter added below.)
      const std::vector<Record> found = fetch_records(db, {id});
      if (!found.empty() && found.front().terminal) {
        respond(answer_of(found.front()));
        return;
      }
    }
    if (req.wait) {
      bool gone = false;
      {
        std::lock_guard lock{p.state->mu};
        p.state->id = id;
        gone = p.state->gone;
      }
      add_waiter(id, respond);
      if (gone) client_left(id, keyed);
      return;
    }
    HttpResponse r{.status = kStatusAccepted,
                   .body = json_text({{"id", id}, {"state", "queued"}, {"node", node_}})};
    r.headers.emplace_back("Location", "/v1/jobs/" + std::to_string(id));
    respond(std::move(r));
  }

  static HttpResponse rejection(const std::string& kind, Reason reason, std::string_view why) {
    const HttpStatus s = http_status_of(reason);
    HttpResponse r{.status = s.code,
                   .body = json_text({{"id", nullptr},
                                      {"kind", kind},
                                      {"state", to_string(state_of(reason))},
                                      {"reason", to_string(reason)},
                                      {"error", why}})};
    if (s.retry_after) r.headers.emplace_back("Retry-After", "1");
    return r;
  }

  // ---- waiters ------------------------------------------------------------------------------

  void add_waiter(JobId id, const Respond& respond) {
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

  // The waiting client left. Like a lone daemon: a job without a key that nobody else here
  // waits for is cancelled (cause caller), wherever it runs.
  void client_left(JobId id, bool keyed) {
    if (keyed) return;
    post([this, id](PgSession& db) { db.exec("SELECT sandglass_cancel($1, $2)", {node_, std::to_string(id)}); });
  }

  void remember_outcome(JobId id) {  // under wait_mu_
    if (recent_set_.insert(id).second) {
      recent_.push_back(id);
      if (recent_.size() > kRecentOutcomes) {
        recent_set_.erase(recent_.front());
        recent_.pop_front();
      }
    }
  }

  void listener_loop(std::stop_token st) {
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
                {owner_});
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

  void handle_notifications(PgSession& db, const std::vector<Notification>& notes) {
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
        if (id && sp != std::string::npos && std::string_view{n.payload}.substr(sp + 1) == owner_) {
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
  void outcome_noticed(std::string_view line, TimePoint now,
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
        notify_lag_.Observe(std::chrono::duration<double>(now - it->second).count());
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

  void answer(PgSession& db, std::vector<std::pair<JobId, Respond>> to_answer) {
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
  void answer_all_terminal(PgSession& db) {
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

  // ---- claiming and running -----------------------------------------------------------------

  struct Held {
    int attempt = 0;
    JobHandle handle;
    JobContext* context = nullptr;  // while the handler runs
    bool commit_written = false;
    bool cancel_pending = false;    // a cancel came before the handle
    TimePoint claimed_at{};
  };

  void wake_claimer() {
    if (t_in_claim) {  // the claimer itself, inside claim_once: it holds claim_mu_
      claim_wanted_ = true;
      return;
    }
    {
      std::lock_guard lock{claim_mu_};
      claim_wanted_ = true;
    }
    claim_cv_.notify_one();
  }

  void claimer_loop(std::stop_token st) {
    std::optional<PgSession> db;
    while (!st.stop_requested()) {
      {
        std::unique_lock lock{claim_mu_};
        claim_cv_.wait_for(lock, st, config_.poll, [this] {
          return claim_wanted_ && held_.load(std::memory_order_relaxed) < workers_;
        });
        if (st.stop_requested() || claiming_stopped_) return;
        // Claim in groups: while some workers are busy, wait a little (kClaimGather at most)
        // for a group of them to be free, so that a claim's round trip serves several jobs.
        // An idle node claims at once.
        const std::size_t group = std::max<std::size_t>(1, std::min(config_.claim_batch, workers_ / 2));
        claim_cv_.wait_for(lock, st, kClaimGather, [this, group] {
          const std::size_t held = held_.load(std::memory_order_relaxed);
          return held == 0 || held + group <= workers_;
        });
        if (st.stop_requested() || claiming_stopped_) return;
        claim_wanted_ = false;
      }
      try {
        ensure(db);
        bool more = true;
        while (more && !st.stop_requested()) more = claim_once(*db);
      } catch (const PgError& e) {
        db_failed(e, "claimer");
        db.reset();
        std::this_thread::sleep_for(kReconnectBackoff);
        wake_claimer();
      }
    }
  }

  // Claims up to the free workers' worth and submits them. True when it took a whole batch (the
  // queue may hold more). Throws PgError.
  bool claim_once(PgSession& db) {
    std::lock_guard claim_lock{claim_mu_};  // stop_claiming waits for a claim in progress
    // A job that ends inside submit (refused, or args its kind rejects here) wakes the claimer
    // from this very thread: see wake_claimer.
    t_in_claim = true;
    struct Reset {
      ~Reset() { t_in_claim = false; }
    } reset;
    if (claiming_stopped_) return false;
    const std::size_t held = held_.load(std::memory_order_relaxed);
    if (held >= workers_) return false;
    const std::size_t limit = std::min(workers_ - held, config_.claim_batch);
    std::vector<std::int64_t> tails;
    for (const std::string& k : served_) tails.push_back(us_of(estimates(k).second));
    const TimePoint asked = Clock::now();
    const PgRows rows = db.exec(
        "SELECT job_id, kind, args, priority, attempt, remaining_us, retired "
        "FROM sandglass_claim($1, $2, $3, $4::text[], $5::bigint[])",
        {owner_, node_, std::to_string(limit), text_array(served_), int_array(tails)});
    const TimePoint answered = Clock::now();
    claims_.Increment();
    claim_latency_.Observe(std::chrono::duration<double>(answered - asked).count());
    std::size_t taken = 0;
    for (int r = 0; r < rows.rows(); ++r) {
      if (rows.null(r, 0)) {
        retired_.Increment(static_cast<double>(rows.integer(r, 6)));
        continue;
      }
      ++taken;
      // Remaining by the database's clock at the claim, counted from when the statement was
      // sent: the round trip is charged to the job, never granted to it.
      run_claimed(static_cast<JobId>(rows.integer(r, 0)), std::string{rows.text(r, 1)},
                  rows.text(r, 2), static_cast<Priority>(rows.integer(r, 3)),
                  static_cast<int>(rows.integer(r, 4)),
                  Deadline::after(microseconds{rows.integer(r, 5)}, asked));
    }
    claimed_.Increment(static_cast<double>(taken));
    batch_size_.Observe(static_cast<double>(taken));
    return taken == limit;
  }

  void run_claimed(JobId id, std::string kind_name, std::string_view args_text, Priority priority,
                   int attempt, Deadline deadline) {
    held_.fetch_add(1, std::memory_order_relaxed);
    const JobKind* kind = kinds_.find(kind_name);
    JobHandler handler;
    std::string estimate_key;
    std::string error = "no such kind";
    try {
      if (kind == nullptr) throw std::invalid_argument{"this daemon has no kind " + kind_name};
      boost::json::value args = boost::json::parse(args_text);
      if (!args.is_object()) throw ArgsError{"args", "must be an object"};
      handler = kind->prepare(args.as_object());
      if (kind->estimate_key) estimate_key = kind->estimate_key(args.as_object());
    } catch (const std::exception& e) {
      error = e.what();
    }
    if (!handler) {
      Outcome o{.id = id, .kind = kind_name, .state = State::failed, .reason = Reason::handler_error,
                .error = "the job's args are not valid on node " + node_ + ": " + error};
      finished(id, attempt, o);
      return;
    }
    {
      std::lock_guard lock{held_mu_};
      held_jobs_[id] = Held{.attempt = attempt, .claimed_at = Clock::now()};
    }
    JobHandler wrapped = [this, id, inner = std::move(handler)](JobContext& ctx) mutable {
      set_context(id, &ctx);
      struct Clear {
        Impl* self;
        JobId id;
        ~Clear() { self->set_context(id, nullptr); }
      } clear{this, id};
      inner(ctx);
    };
    JobSpec spec{.kind = kind_name, .priority = priority, .deadline = deadline,
                 .estimate_key = std::move(estimate_key)};
    JobHandle handle = runtime_.submit(std::move(spec), std::move(wrapped),
                                       [this, id, attempt](const Outcome& o) { finished(id, attempt, o); });
    bool cancel_now = false;
    {
      std::lock_guard lock{held_mu_};
      if (const auto it = held_jobs_.find(id); it != held_jobs_.end() && it->second.attempt == attempt) {
        it->second.handle = handle;
        cancel_now = it->second.cancel_pending;
      }
    }
    if (cancel_now) handle.cancel();
  }

  void set_context(JobId id, JobContext* ctx) {
    std::lock_guard lock{held_mu_};
    if (const auto it = held_jobs_.find(id); it != held_jobs_.end()) it->second.context = ctx;
  }

  void cancel_local(JobId id) {
    JobHandle handle;
    {
      std::lock_guard lock{held_mu_};
      const auto it = held_jobs_.find(id);
      if (it == held_jobs_.end()) return;
      if (!it->second.handle) {
        it->second.cancel_pending = true;
        return;
      }
      handle = it->second.handle;
    }
    handle.cancel();  // cause caller; its on_cancel callbacks run on this thread
  }

  // A local job is over: its worker is free, its outcome goes to the finisher.
  void finished(JobId id, int attempt, const Outcome& o) {
    {
      std::lock_guard lock{held_mu_};
      held_jobs_.erase(id);
    }
    {
      std::lock_guard lock{finish_mu_};
      finish_queue_.push_back({id, attempt, o});
    }
    finish_cv_.notify_one();
    held_.fetch_sub(1, std::memory_order_relaxed);
    wake_claimer();
  }

  struct Finish {
    JobId id;
    int attempt;
    Outcome outcome;
  };

  void finisher_loop(std::stop_token st) {
    std::optional<PgSession> db;
    std::vector<Finish> batch;
    while (true) {
      {
        std::unique_lock lock{finish_mu_};
        finishing_ = false;
        finish_cv_.notify_all();  // stop() waits for an empty queue and no batch in flight
        finish_cv_.wait(lock, st, [this] { return !finish_queue_.empty(); });
        if (finish_queue_.empty()) return;  // stop requested and nothing left
        while (!finish_queue_.empty() && batch.size() < kFinishBatch) {
          batch.push_back(std::move(finish_queue_.front()));
          finish_queue_.pop_front();
        }
        finishing_ = true;
      }
      while (!batch.empty()) {
        try {
          ensure(db);
          write_outcomes(*db, batch);
          batch.clear();
        } catch (const PgError& e) {
          db_failed(e, "finisher");
          db.reset();
          if (st.stop_requested()) return;  // stop() gave up waiting: the sweep takes them back
          std::this_thread::sleep_for(kReconnectBackoff);
        }
      }
    }
  }

  void write_outcomes(PgSession& db, const std::vector<Finish>& batch) {
    std::vector<std::int64_t> ids, attempts, run_us;
    std::vector<std::optional<std::string>> states, reasons, causes, results, errors;
    std::vector<std::string> committed;
    for (const Finish& f : batch) {
      const Outcome& o = f.outcome;
      ids.push_back(static_cast<std::int64_t>(f.id));
      attempts.push_back(f.attempt);
      states.emplace_back(std::string{to_string(o.state)});
      reasons.emplace_back(std::string{to_string(o.reason)});
      causes.push_back(o.cause == CancelCause::none ? std::nullopt
                                                    : std::optional<std::string>{std::string{to_string(o.cause)}});
      committed.emplace_back(o.committed ? "t" : "f");
      results.push_back(o.result.empty() ? std::nullopt : std::optional<std::string>{o.result});
      errors.push_back(o.error.empty() ? std::nullopt : std::optional<std::string>{o.error});
      run_us.push_back(o.started() ? us_of(o.timings.run_time) : -1);
    }
    const TimePoint sent = Clock::now();
    const PgRows rows = db.exec(
        "SELECT * FROM sandglass_finish($1, $2::bigint[], $3::int[], $4::text[], $5::text[], "
        "$6::text[], $7::boolean[], $8::text[], $9::text[], $10::bigint[])",
        {owner_, int_array(ids), int_array(attempts), text_array(states), text_array(reasons),
         text_array(causes), text_array(committed), text_array(results), text_array(errors),
         int_array(run_us)});
    const std::size_t written = static_cast<std::size_t>(rows.rows());
    if (written < batch.size()) {
      stale_.Increment(static_cast<double>(batch.size() - written));
      spdlog::info("cluster: {} stale outcome(s) discarded: those jobs were no longer this node's",
                   batch.size() - written);
    }
    std::lock_guard lock{lag_mu_};
    if (finish_sent_.size() > 4 * kFinishBatch) finish_sent_.clear();  // NOTIFYs lost: forget
    for (int r = 0; r < rows.rows(); ++r) finish_sent_[static_cast<JobId>(rows.integer(r, 0))] = sent;
  }

  // ---- heartbeat, commit points, sweep ------------------------------------------------------

  void heartbeat_loop(std::stop_token st) {
    std::optional<PgSession> db;
    TimePoint next_beat = Clock::now();
    while (!st.stop_requested()) {
      {
        std::unique_lock lock{heartbeat_mu_};
        heartbeat_cv_.wait_for(lock, st, kCommitPoll, [] { return false; });
      }
      if (st.stop_requested()) return;
      std::vector<std::int64_t> ids, attempts;
      {
        std::lock_guard lock{held_mu_};
        for (auto& [id, h] : held_jobs_) {
          if (!h.commit_written && h.context != nullptr && h.context->committed()) {
            ids.push_back(static_cast<std::int64_t>(id));
            attempts.push_back(h.attempt);
          }
        }
      }
      const TimePoint now = Clock::now();
      if (ids.empty() && now < next_beat) continue;
      try {
        ensure(db);
        const PgRows alive = db->exec("SELECT sandglass_heartbeat($1, $2::bigint[], $3::int[])",
                                      {owner_, int_array(ids), int_array(attempts)});
        {
          std::lock_guard lock{held_mu_};
          for (const std::int64_t id : ids) {
            if (const auto it = held_jobs_.find(static_cast<JobId>(id)); it != held_jobs_.end()) {
              it->second.commit_written = true;
            }
          }
        }
        if (!alive.boolean(0, 0)) {  // our row was removed: come back
          db->exec("INSERT INTO sandglass_nodes (owner, node, workers, capacity) VALUES ($1, $2, $3, $4) "
                   "ON CONFLICT (owner) DO UPDATE SET heartbeat_at = clock_timestamp()",
                   {owner_, node_, std::to_string(workers_), std::to_string(capacity_)});
        }
        if (now >= next_beat) {
          next_beat = now + config_.heartbeat;
          sweep(*db);
        }
        db_ok_.store(true, std::memory_order_relaxed);
      } catch (const PgError& e) {
        if (db_ok_.exchange(false, std::memory_order_relaxed)) {
          spdlog::error("cluster: the database cannot be reached; /readyz answers 503");
        }
        db_failed(e, "heartbeat");
        db.reset();
        next_beat = Clock::now() + kReconnectBackoff;
      }
    }
  }

  void sweep(PgSession& db) {
    std::vector<std::int64_t> tails;
    for (const std::string& k : served_) tails.push_back(us_of(estimates(k).second));
    const PgRows swept = db.exec("SELECT requeued, lost FROM sandglass_sweep($1, $2, $3::text[], $4::bigint[])",
                                 {node_, std::to_string(config_.lease.count()), text_array(served_),
                                  int_array(tails)});
    if (swept.rows() > 0 && (swept.integer(0, 0) > 0 || swept.integer(0, 1) > 0)) {
      reclaimed_.Increment(static_cast<double>(swept.integer(0, 0)));
      lost_.Increment(static_cast<double>(swept.integer(0, 1)));
      spdlog::warn("cluster: took back the jobs of a lost node: {} queued again, {} ended node_lost",
                   swept.integer(0, 0), swept.integer(0, 1));
      wake_claimer();
    }
    // Expired heads end even while every worker is busy (a claim of zero jobs retires them).
    const PgRows retired = db.exec(
        "SELECT retired FROM sandglass_claim($1, $2, 0, $3::text[], $4::bigint[]) WHERE retired > 0",
        {owner_, node_, text_array(served_), int_array(tails)});
    if (retired.rows() > 0) retired_.Increment(static_cast<double>(retired.integer(0, 0)));
  }

  // ---- state --------------------------------------------------------------------------------

  const ClusterConfig config_;
  const BudgetPolicy budget_;
  const KindRegistry& kinds_;
  Runtime& runtime_;
  const std::size_t workers_;
  const std::size_t capacity_;
  const ServiceTimeEstimatorOptions estimator_options_;
  std::vector<std::string> served_;
  std::string node_;
  std::string owner_;  // node + "/" + a random incarnation: the fencing owner
  std::optional<PgSession> main_db_;
  bool started_ = false;
  bool stopped_ = false;
  std::atomic<bool> db_ok_{false};
  std::atomic<bool> listening_{false};  // the listener's first LISTEN is done

  std::shared_ptr<prometheus::Registry> registry_ = std::make_shared<prometheus::Registry>();
  prometheus::Counter& claims_;
  prometheus::Counter& claimed_;
  prometheus::Counter& retired_;
  prometheus::Counter& stale_;
  prometheus::Counter& reclaimed_;
  prometheus::Counter& lost_;
  prometheus::Counter& db_errors_;
  prometheus::Histogram& claim_latency_;
  prometheus::Histogram& batch_size_;
  prometheus::Histogram& notify_lag_;

  std::mutex estimates_mu_;
  std::map<std::string, ServiceTimeEstimator, std::less<>> estimators_;  // guarded

  std::mutex intake_mu_;
  std::condition_variable_any intake_cv_;
  std::deque<QueuedTask> intake_queue_;  // guarded by intake_mu_
  std::deque<Pending> submit_queue_;     // guarded by intake_mu_

  std::mutex wait_mu_;
  std::unordered_map<JobId, std::vector<Respond>> waiters_;  // guarded by wait_mu_
  std::deque<JobId> recent_;                                 // guarded by wait_mu_
  std::unordered_set<JobId> recent_set_;                     // guarded by wait_mu_
  std::vector<std::pair<JobId, Respond>> late_;              // guarded by wait_mu_
  WakeFd listener_wake_;

  std::mutex claim_mu_;
  std::condition_variable_any claim_cv_;
  bool claim_wanted_ = true;        // guarded by claim_mu_
  bool claiming_stopped_ = false;   // guarded by claim_mu_
  std::atomic<std::size_t> held_{0};  // claimed jobs without a local outcome yet

  std::mutex held_mu_;
  std::unordered_map<JobId, Held> held_jobs_;  // guarded by held_mu_

  std::mutex finish_mu_;
  std::condition_variable_any finish_cv_;
  std::deque<Finish> finish_queue_;  // guarded by finish_mu_
  bool finishing_ = false;           // guarded by finish_mu_: a batch is being written

  std::mutex lag_mu_;
  std::unordered_map<JobId, TimePoint> finish_sent_;  // guarded by lag_mu_

  std::mutex heartbeat_mu_;
  std::condition_variable_any heartbeat_cv_;

  // Last: the threads stop (in stop()) before anything above goes.
  std::jthread listener_;
  std::vector<std::jthread> intake_;
  std::jthread finisher_;
  std::jthread heartbeat_;
  std::jthread claimer_;
};

ClusterNode::ClusterNode(const DaemonConfig& config, const KindRegistry& kinds, Runtime& runtime)
    : impl_{std::make_unique<Impl>(config, kinds, runtime)} {}
ClusterNode::~ClusterNode() = default;
void ClusterNode::start(const std::string& listen_address) { impl_->start(listen_address); }
void ClusterNode::stop_claiming() { impl_->stop_claiming(); }
void ClusterNode::stop(Duration flush_for) { impl_->stop(flush_for); }
ClusterNode::ClientGone ClusterNode::submit(JobRequest request, TimePoint arrived_at, Respond respond) {
  return impl_->submit(std::move(request), arrived_at, std::move(respond));
}
void ClusterNode::job_record(JobId id, Respond respond) { impl_->job_record(id, std::move(respond)); }
void ClusterNode::cancel(JobId id, Respond respond) { impl_->cancel(id, std::move(respond)); }
std::string ClusterNode::metrics_text() const { return impl_->metrics_text(); }
bool ClusterNode::ready() const noexcept { return impl_->ready(); }
const std::string& ClusterNode::node_name() const noexcept { return impl_->node_name(); }

std::string migrate_only(const ClusterConfig& config) {
  PgSession db = PgSession::open(config.conninfo);
  const MigrationReport r = migrate(db);
  if (r.applied.empty()) {
    return fmt::format("cluster database at {}: schema is up to date (version {})\n", db.server(),
                       r.to_version);
  }
  return fmt::format("cluster database at {}: schema migrated from version {} to {} ({})\n",
                     db.server(), r.from_version, r.to_version, fmt::join(r.applied, ", "));
}

}  // namespace sandglass::daemon::cluster
