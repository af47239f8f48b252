// The intake of a cluster node (node_impl.hpp): POST /v1/jobs (batched admission and insert,
// with claims at insert), GET and DELETE /v1/jobs/ID, on two intake threads with a connection
// each.
#include "daemon/cluster/job_rows.hpp"
#include "daemon/cluster/node_impl.hpp"
#include "daemon/cluster/standing_refusal.hpp"

#include <boost/json/serialize.hpp>
#include <fmt/format.h>

namespace sandglass::daemon::cluster {

// The refusals a node decides alone, exactly as the database would: too little budget left,
// or (for a job without a key: a keyed one may attach instead) a tail estimate longer than the
// time left, which no queue, even an empty one, lets finish in time (sandglass_submit_many's
// rule with no work ahead). Such a submission costs no statement and no wait for an intake
// thread. When the queue is also full, this answers deadline_implausible where the database
// would say queue_full: the order of a lone daemon's admission.
ClusterNode::Impl::BudgetLeft ClusterNode::Impl::budget_left(const JobRequest& req,
                                                             TimePoint arrived_at) const {
  const Duration budget = budget_.grant(req.budget).budget;
  return {.budget = budget,
          .left = budget - std::min(budget, budget_.reserve) - (Clock::now() - arrived_at)};
}

std::optional<HttpResponse> ClusterNode::Impl::refused_here(const JobRequest& req, Duration left,
                                                            Duration tail) {
  if (left < budget_.min_useful) {
    return rejection(req.kind, Reason::budget_too_small, "less budget left than the minimum useful duration");
  }
  if (!req.idempotency_key.empty() || !db_ok_.load(std::memory_order_relaxed)) return std::nullopt;
  if (tail <= Duration::zero() || us_of(tail) <= us_of(left)) return std::nullopt;
  metrics_.refused_here.Increment();
  return rejection(req.kind, Reason::deadline_implausible,
                   req.expected > Duration::zero()
                       ? "the job's own size is longer than the time left, even with nothing "
                         "queued ahead"
                       : "this kind's run-time estimate is longer than the time left, even with "
                         "nothing queued ahead");
}

ClusterNode::ClientGone ClusterNode::Impl::submit(JobRequest req, TimePoint arrived_at, Respond respond) {
  if (std::optional<HttpResponse> refused =
          refused_here(req, budget_left(req, arrived_at).left, estimates(req.kind, req.expected).tail)) {
    respond(std::move(*refused));
    return {};
  }
  auto state = std::make_shared<Submission>();
  const bool wait = req.wait;
  const bool keyed = !req.idempotency_key.empty();
  {
    std::lock_guard lock{intake_mu_};
    submit_queue_.push_back(
        Pending{std::move(req), arrived_at, new_intake_token(), std::move(respond), state});
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

void ClusterNode::Impl::submit_many(std::vector<JobRequest> requests, TimePoint arrived_at,
                                    std::function<void(std::vector<HttpResponse>)> answered) {
  // Each job's answer lands in its place; the last one to arrive answers the batch.
  struct Answers {
    std::mutex mu;
    std::vector<HttpResponse> answers;  // guarded by mu
    std::size_t left = 0;               // guarded by mu
    std::function<void(std::vector<HttpResponse>)> answered;
  };
  auto all = std::make_shared<Answers>();
  all->answers.resize(requests.size());
  all->left = requests.size();
  all->answered = std::move(answered);
  std::vector<Pending> batch;
  batch.reserve(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    JobRequest& req = requests[i];
    req.wait = false;
    Respond respond = [all, i](HttpResponse r) {
      std::unique_lock lock{all->mu};
      all->answers[i] = std::move(r);
      if (--all->left > 0) return;
      lock.unlock();
      all->answered(std::move(all->answers));
    };
    batch.push_back(Pending{std::move(req), arrived_at, new_intake_token(), std::move(respond),
                            std::make_shared<Submission>()});
  }
  {
    std::lock_guard lock{intake_mu_};
    batch_queue_.push_back(std::move(batch));
  }
  intake_cv_.notify_one();
}

namespace {

// Answers with the job's record as the database has it, or 404.
void respond_with_record(PgSession& db, JobId id, const ClusterNode::Respond& respond) {
  const std::vector<Record> found = fetch_records(db, {id});
  if (found.empty()) {
    respond(json_error(kStatusNotFound, "no such job", "id"));
  } else {
    respond({.body = found.front().json});
  }
}

}  // namespace

void ClusterNode::Impl::job_record(JobId id, bool wait, Respond respond) {
  if (!wait) {
    post([id, respond](PgSession& db) { respond_with_record(db, id, respond); }, respond);
    return;
  }
  post([this, id, respond](PgSession& db) {
    // Answered at its job's deadline plus the reserve at the latest, with the row as it stands.
    wait_for_row(db, id, respond, budget_.reserve, [](const Record& rec) {
      return HttpResponse{.body = rec.json};
    });
  }, respond);
}

void ClusterNode::Impl::cancel(JobId id, Respond respond) {
  post([this, id, respond](PgSession& db) {
    // As a lone daemon: the final record once the job is over (a queued one is over at once, a
    // running one once its node stopped it), waiting up to kCancelAnswerWait; else 202.
    wait_for_row(db, id, respond, std::nullopt, [id](const Record& rec) {
      if (rec.terminal) return HttpResponse{.body = rec.json};
      return HttpResponse{.status = kStatusAccepted,
                          .body = json_text({{"id", id}, {"state", "cancelling"}, {"cause", "caller"}})};
    }, /*cancel_first=*/true);
  }, respond);
}

void ClusterNode::Impl::wait_for_row(PgSession& db, JobId id, const Respond& respond,
                                     std::optional<Duration> past_deadline,
                                     std::function<HttpResponse(const Record&)> answer_from_row,
                                     bool cancel_first) {
  if (cancel_first) db.exec("SELECT sandglass_cancel($1, $2)", {node_, std::to_string(id)});
  std::vector<Record> found = fetch_records(db, {id});
  if (!found.empty() && !found.front().terminal) {
    // Not over: marked awaited, then read again. An outcome written after that commit is
    // announced, one written before it is in the second read; a NOTIFY the listener handles
    // before the waiter is added finds it among the recent outcomes (Waiters::add). A job over
    // at the first read is never marked: its outcome was not announced for nobody.
    db.exec("SELECT sandglass_await(ARRAY[$1]::bigint[], $2)", {std::to_string(id), node_});
    found = fetch_records(db, {id});
  }
  if (found.empty()) {
    respond(json_error(kStatusNotFound, "no such job", "id"));
    return;
  }
  const Record& rec = found.front();
  if (rec.terminal) {
    respond(answer_from_row(rec));
    return;
  }
  const Duration wait = past_deadline
                            ? std::chrono::microseconds{std::max<std::int64_t>(rec.remaining_us, 0)} +
                                  *past_deadline
                            : kCancelAnswerWait;
  add_waiter(id, respond, Deadline::after(wait).time_point(), std::move(answer_from_row));
}

void ClusterNode::Impl::post(Task run, Respond on_failure) {
  {
    std::lock_guard lock{intake_mu_};
    intake_queue_.push_back({std::move(run), std::move(on_failure)});
  }
  intake_cv_.notify_one();
}

void ClusterNode::Impl::intake_loop(std::stop_token st) {
  std::optional<PgSession> db;
  std::vector<Pending> submits;
  try {
    ensure(db);
  } catch (const PgError& e) {
    db_failed(e, "intake");
  }
  while (!st.stop_requested()) {
    QueuedTask task;
    {
      std::unique_lock lock{intake_mu_};
      intake_cv_.wait(lock, st, [this] {
        return !intake_queue_.empty() || !submit_queue_.empty() || !batch_queue_.empty();
      });
      // A batch request goes in one statement of its own; other submissions waiting together in
      // one statement; reads and cancels one by one.
      if (!batch_queue_.empty()) {
        submits = std::move(batch_queue_.front());
        batch_queue_.pop_front();
      } else {
        while (!submit_queue_.empty() && submits.size() < kSubmitBatch) {
          submits.push_back(std::move(submit_queue_.front()));
          submit_queue_.pop_front();
        }
      }
      if (submits.empty()) {
        if (intake_queue_.empty()) continue;
        task = std::move(intake_queue_.front());
        intake_queue_.pop_front();
      }
    }
    if (!submits.empty()) {
      submit_batch(db, submits);
      submits.clear();
      continue;
    }
    run_task(db, task);
  }
}

// Every served kind's tail estimate (estimates), for a claim's rule.
std::vector<std::int64_t> ClusterNode::Impl::served_tails() {
  std::vector<std::int64_t> tails;
  // At least min_useful: a claim retires what the Runtime would refuse budget_too_small, so
  // that a claimed job is never refused after its claim (JobSpec::admitted). A kind whose jobs
  // each state their size in their args (JobKind::expected: sleep, spin) has no one tail, and a
  // row keeps no stated size (expected_ms may differ from its args): the claim retires its rows
  // only below min_useful, so that one long job of the kind does not end its short ones.
  for (const std::string& k : served_) {
    const JobKind* kind = kinds_.find(k);
    const bool sized = kind != nullptr && kind->expected;
    tails.push_back(us_of(std::max(sized ? Duration::zero() : estimates(k).tail, budget_.min_useful)));
  }
  return tails;
}

void ClusterNode::Impl::insert(PgSession& db, std::vector<Pending>& batch) {
  std::vector<std::optional<std::string>> kinds, args, keys, fingerprints, tokens;
  std::vector<std::string> waits;  // "t": the submitter waits, so the job is awaited
  std::vector<std::int64_t> priorities, remaining, budgets, works, tails, delays;
  std::vector<std::optional<std::string>> retry_max, retry_backoff;  // NULL: no retry
  std::vector<std::size_t> sent;  // indexes into batch
  std::size_t claimable = 0;      // unkeyed jobs of kinds this node serves
  for (std::size_t i = 0; i < batch.size(); ++i) {
    if (!batch[i].respond) continue;  // answered on an earlier try
    const JobRequest& req = batch[i].request;
    const auto [budget, left] = budget_left(req, batch[i].arrived_at);
    const auto [work, tail] = estimates(req.kind, req.expected);
    if (std::optional<HttpResponse> refused = refused_here(req, left, tail)) {
      std::exchange(batch[i].respond, {})(std::move(*refused));  // the wait here used it up
      continue;
    }
    const bool keyed = !req.idempotency_key.empty();
    if (!keyed && req.delay <= Duration::zero() &&
        std::find(served_.begin(), served_.end(), req.kind) != served_.end()) {
      ++claimable;
    }
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
    waits.emplace_back(req.wait ? "t" : "f");
    tokens.emplace_back(batch[i].token);
    delays.push_back(us_of(std::max(req.delay, Duration::zero())));
    retry_max.push_back(req.retry ? std::optional<std::string>{std::to_string(req.retry->max_attempts)}
                                  : std::nullopt);
    retry_backoff.push_back(req.retry ? std::optional<std::string>{std::to_string(us_of(req.retry->backoff))}
                                      : std::nullopt);
    sent.push_back(i);
  }
  if (sent.empty()) return;
  // Claims at insert take free workers like any claim: reserved first, and never once
  // stop_claiming has begun (it waits for this statement).
  std::shared_lock claim_lock{claim_run_mu_, std::defer_lock};
  std::size_t reserved = 0;
  if (claimable > 0 && !claims_closing_.load(std::memory_order_relaxed)) {
    claim_lock.lock();
    // Free workers only (claim_ahead in claimer.cpp).
    if (!claiming_stopped_) {
      reserved = reserve_workers(std::min(claimable, config_.claim_batch), /*ahead=*/false);
    }
    if (reserved == 0) claim_lock.unlock();
  }
  struct Unreserve {  // gives back the workers no job took, also when the statement throws
    Impl* self;
    std::size_t n;
    ~Unreserve() { self->release_workers(n, /*for_claimer=*/true); }
  } unreserve{this, reserved};
  const TimePoint asked = Clock::now();
  for (const std::size_t i : sent) {
    metrics_.intake_wait.Observe(std::chrono::duration<double>(asked - batch[i].arrived_at).count());
  }
  metrics_.intake_batch.Observe(static_cast<double>(sent.size()));
  const NodeLease::Incarnation claimer = lease_.incarnation();
  const PgRows rows = exec_claiming(
      db,
      "SELECT ord, job_id, verdict, remaining_us FROM sandglass_submit_claim($1, $2, $3, "
      "$4::text[], $5::text[], $6::text[], $7::smallint[], $8::text[], $9::text[], "
      "$10::bigint[], $11::bigint[], $12::bigint[], $13::bigint[], $14, $15::boolean[], "
      "$16::uuid[], $17::bigint[], $18::integer[], $19::bigint[])",
      {node_, claimer.owner, std::to_string(reserved), served_array_, text_array(kinds), text_array(args),
       int_array(priorities), text_array(keys), text_array(fingerprints), int_array(remaining),
       int_array(budgets), int_array(works), int_array(tails),
       std::to_string(config_.lease.count()), text_array(waits), text_array(tokens),
       int_array(delays), text_array(retry_max), text_array(retry_backoff)},
      /*may_claim=*/reserved > 0);  // claims at insert
  metrics_.intake_statement.Observe(std::chrono::duration<double>(Clock::now() - asked).count());
  std::vector<Claimed> claimed;
  bool scheduled = false;
  for (int r = 0; r < rows.rows(); ++r) {
    const std::size_t at = static_cast<std::size_t>(rows.integer(r, 0) - 1);
    Pending& p = batch[sent[at]];
    Respond respond = std::exchange(p.respond, {});
    const auto id = static_cast<JobId>(rows.integer(r, 1));
    const std::string_view verdict = rows.text(r, 2);
    if (verdict == "claimed" && claimed.size() < unreserve.n) {
      // Remaining by the database's clock at the insert, counted from when the statement was
      // sent: the round trip is charged to the job, as for a claim.
      claimed.push_back({.id = id, .kind = p.request.kind, .args = *args[at],
                         .priority = p.request.priority, .attempt = 1,
                         .deadline = Deadline::after(std::chrono::microseconds{rows.integer(r, 3)}, asked),
                         .epoch = claimer.epoch, .retry = p.request.retry});
    }
    scheduled = scheduled || verdict == "scheduled";
    try {
      admitted(db, p, id, verdict, respond);  // a waiter is added before the job can end
    } catch (const PgError& e) {
      db_failed(e, "intake");
      respond(not_served(e));
    }
  }
  if (scheduled) wake_maintenance();  // it waits for the earliest start it knows
  unreserve.n -= claimed.size();  // these workers are the claimed jobs' now
  if (!claimed.empty()) {
    metrics_.claimed.Increment(static_cast<double>(claimed.size()));
    metrics_.claimed_at_submit.Increment(static_cast<double>(claimed.size()));
  }
  for (Claimed& job : claimed) run_claimed(std::move(job));
}

// Answers one submission by its verdict: admitted, claimed (admitted and claimed here at
// insert), scheduled (a delayed job, admitted at its start), attached, conflict, queue_full,
// deadline_implausible or the standing-queue rule's refusal (standing_refusal.hpp).
void ClusterNode::Impl::admitted(PgSession& db, const Pending& p, JobId id,
                                 std::string_view verdict, const ClusterNode::Respond& respond) {
  const JobRequest& req = p.request;
  if (const std::optional<StandingRefusal> standing = standing_refusal(verdict)) {
    HttpResponse r = rejection(req.kind, Reason::queue_full, standing->error);
    for (auto& [name, value] : r.headers) {
      if (name == "Retry-After") {
        value = std::to_string(std::max<std::int64_t>(
            std::chrono::ceil<std::chrono::seconds>(standing->retry_after).count(), 1));
      }
    }
    respond(std::move(r));
    return;
  }
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
  std::string state{verdict == "claimed" ? "running" : verdict == "scheduled" ? "scheduled" : "queued"};
  if (verdict == "attached") {
    // Its outcome may be long written, before this node listened: read it first. (Ended
    // after this read, its NOTIFY reaches the waiter added below: a waiting submission's
    // statement marked the job awaited, and the outcome's write either came before that
    // commit, so this read sees it, or saw the mark and announced it: functions.sql, "Announced
    // outcomes".)
    const std::vector<Record> found = fetch_records(db, {id});
    if (!found.empty() && found.front().terminal) {
      respond(answer_of(found.front()));
      return;
    }
    if (!found.empty()) state = found.front().state;
  }
  if (req.wait) {
    bool gone = false;
    {
      std::lock_guard lock{p.state->mu};
      p.state->id = id;
      gone = p.state->gone;
    }
    // Answered by the NOTIFY of its outcome, or at the latest once its own deadline plus the
    // reserve has passed (that is, its granted budget from its arrival and delay), by a read
    // of the row.
    add_waiter(id, respond,
               Deadline::after(budget_.grant(req.budget).budget + std::max(req.delay, Duration::zero()),
                               p.arrived_at).time_point());
    if (gone) client_left(id, keyed);
    return;
  }
  HttpResponse r{.status = kStatusAccepted,
                 .body = json_text({{"id", id},
                                    {"state", state},
                                    {"node", node_}})};
  r.headers.emplace_back("Location", "/v1/jobs/" + std::to_string(id));
  respond(std::move(r));
}

HttpResponse ClusterNode::Impl::rejection(const std::string& kind, Reason reason, std::string_view why) {
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

// The waiting client left. Like a lone daemon: a job without a key that nobody else here
// waits for is cancelled (cause caller), wherever it runs.
void ClusterNode::Impl::client_left(JobId id, bool keyed) {
  if (keyed) return;
  post([this, id](PgSession& db) { db.exec("SELECT sandglass_cancel($1, $2)", {node_, std::to_string(id)}); });
}

}  // namespace sandglass::daemon::cluster
