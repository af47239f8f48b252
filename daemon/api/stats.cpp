#include "daemon/api/stats.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <chrono>
#include <charconv>
#include <map>
#include <optional>
#include <string_view>

namespace sandglass::daemon {
namespace {

constexpr std::size_t kStateCount = 5;
constexpr std::int64_t kMinuteSeconds = 60;

std::int64_t whole_ms(Duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

std::int64_t second_of(TimePoint t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

void observe(LiveStats::Histogram& h, Duration d) {
  const std::int64_t ms = whole_ms(d);
  const auto& b = LiveStats::kBucketsMs;
  ++h.counts[static_cast<std::size_t>(std::lower_bound(b.begin(), b.end(), ms) - b.begin())];
}

Reason reason_of(std::size_t i) { return static_cast<Reason>(i); }
CancelCause cause_of(std::size_t i) { return static_cast<CancelCause>(i); }

boost::json::array histogram_json(const LiveStats::Histogram& h) {
  boost::json::array a;
  for (const std::uint64_t c : h.counts) a.emplace_back(c);
  return a;
}

// One sample line of the Prometheus text format: `name{label="value"} number`.
struct Sample {
  std::string_view name;
  std::string label;  // the first label's value, unescaped
  double value = 0;
};

std::optional<Sample> parse_sample(std::string_view line) {
  const auto brace = line.find('{');
  if (brace == std::string_view::npos || line.starts_with('#')) return std::nullopt;
  Sample s{.name = line.substr(0, brace)};
  auto quote = line.find('"', brace);
  if (quote == std::string_view::npos) return std::nullopt;
  std::size_t i = quote + 1;
  for (; i < line.size() && line[i] != '"'; ++i) {
    if (line[i] == '\\' && i + 1 < line.size()) {
      ++i;
      s.label += line[i] == 'n' ? '\n' : line[i];
    } else {
      s.label += line[i];
    }
  }
  const auto close = line.find("} ", i);
  if (close == std::string_view::npos) return std::nullopt;
  const std::string_view number = line.substr(close + 2);
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), s.value);
  if (ec != std::errc{}) return std::nullopt;
  return s;
}

std::string_view breaker_name(double v) {
  if (v == 0) return "closed";
  if (v == 1) return "half_open";
  return "open";
}

// Breaker states per upstream and SQL pool use per database, from the kinds' own series.
void kinds_json(std::string_view text, boost::json::object& out) {
  boost::json::object breakers, pools;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    const auto s = parse_sample(line);
    if (!s) continue;
    const auto n = static_cast<std::int64_t>(s->value);
    if (s->name == "sandglass_upstream_breaker_state") {
      breakers[s->label] = breaker_name(s->value);
    } else if (s->name.starts_with("sandglass_sql_pool_") && s->name != "sandglass_sql_pool_wait_seconds") {
      const std::string_view field = s->name.substr(std::string_view{"sandglass_sql_pool_"}.size());
      if (field != "size" && field != "connections" && field != "in_use") continue;
      boost::json::value& pool = pools[s->label];
      if (!pool.is_object()) pool.emplace_object();
      pool.as_object()[field] = n;
    }
  }
  out["breakers"] = std::move(breakers);
  out["sql_pools"] = std::move(pools);
}

}  // namespace

LiveStats::LiveStats() {
  for (Histogram* h : {&budget_, &remaining_at_start_, &remaining_at_end_}) {
    h->counts.assign(kBucketsMs.size() + 1, 0);
  }
}

LiveStats::Second& LiveStats::second_at(std::int64_t second) {
  Second& s = ring_[static_cast<std::size_t>(second) % kSeconds];
  if (s.second != second) s = Second{.second = second};
  return s;
}

void LiveStats::job_finished(const Outcome& o, TimePoint now) {
  std::lock_guard lock{mu_};
  Second& s = second_at(second_of(now));
  ++s.by_state_reason[static_cast<std::size_t>(o.state)][static_cast<std::size_t>(o.reason)];
  if (o.state == State::cancelled) ++s.cancelled_by_cause[static_cast<std::size_t>(o.cause)];
  if (o.state == State::completed && o.timings.remaining_at_end < Duration::zero()) ++s.completed_late;

  const bool admitted = o.state != State::rejected || o.reason == Reason::shed;
  if (admitted) observe(budget_, o.timings.budget);
  if (o.started()) {
    observe(remaining_at_start_, o.timings.remaining_at_start);
    if (o.timings.remaining_at_end < Duration::zero()) {
      ++remaining_at_end_.late;
    } else {
      observe(remaining_at_end_, o.timings.remaining_at_end);
    }
  }
}

LiveStats::Snapshot LiveStats::snapshot(TimePoint now) const {
  const std::int64_t last = second_of(now);
  Snapshot snap;
  snap.seconds.resize(kSeconds);
  std::lock_guard lock{mu_};
  for (std::size_t i = 0; i < kSeconds; ++i) {
    const std::int64_t second = last - static_cast<std::int64_t>(kSeconds - 1 - i);
    const Second& s = ring_[static_cast<std::size_t>(second) % kSeconds];
    snap.seconds[i] = s.second == second ? s : Second{.second = second};
  }
  snap.budget = budget_;
  snap.remaining_at_start = remaining_at_start_;
  snap.remaining_at_end = remaining_at_end_;
  return snap;
}

std::string stats_json(const StatsInputs& in) {
  boost::json::object r;
  r["draining"] = in.draining;
  r["capacity"] = {{"workers", in.options.workers}, {"queue", in.options.capacity}};

  boost::json::object by_class;
  for (std::size_t p = 0; p < kPriorityCount; ++p) {
    by_class[to_string(static_cast<Priority>(p))] = in.runtime.queued_by_priority[p];
  }
  r["queue"] = {{"depth", in.runtime.queued}, {"by_class", std::move(by_class)},
                {"peak", in.runtime.peak_queued}};

  std::map<std::string, std::size_t> running_by_kind;
  std::size_t running = 0;
  for (const JobRecords::View& v : in.live_jobs) {
    if (!v.outcome && v.progress.started_at) {
      ++running_by_kind[v.kind];
      ++running;
    }
  }
  boost::json::object rk;
  for (const auto& [kind, n] : running_by_kind) rk[kind] = n;
  r["running"] = {{"total", in.runtime.running}, {"by_kind", std::move(rk)},
                  {"overrunning", in.runtime.overrunning}};
  r["submitted_total"] = in.runtime.submitted;
  // The admission rules' state: the standing-queue rule and the margin the runtime measured
  // for its own prediction error (milliseconds, to the microsecond).
  const auto ms = [](Duration d) {
    return static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(d).count()) / 1000.0;
  };
  r["admission"] = {{"standing_queue", in.runtime.standing_queue},
                    {"queue_delay_target_ms", ms(in.runtime.queue_delay_target)},
                    {"start_error_tail_ms", ms(in.runtime.start_error_tail)},
                    {"run_error_tail_ms", ms(in.runtime.run_error_tail)},
                    {"margin_ms", ms(in.runtime.prediction_margin)}};

  // The last minute: sums of its seconds.
  const auto& seconds = in.live.seconds;
  std::array<std::array<std::uint64_t, kReasonCount>, kStateCount> sr{};
  std::array<std::uint64_t, kCancelCauseCount> causes{};
  std::uint64_t late = 0;
  for (std::size_t i = seconds.size() - std::min<std::size_t>(seconds.size(), kMinuteSeconds);
       i < seconds.size(); ++i) {
    for (std::size_t st = 0; st < kStateCount; ++st) {
      for (std::size_t re = 0; re < kReasonCount; ++re) sr[st][re] += seconds[i].by_state_reason[st][re];
    }
    for (std::size_t c = 0; c < kCancelCauseCount; ++c) causes[c] += seconds[i].cancelled_by_cause[c];
    late += seconds[i].completed_late;
  }
  auto group = [&](State state, std::initializer_list<Reason> always) {
    boost::json::object by_reason;
    std::uint64_t total = 0;
    for (const Reason re : always) by_reason[to_string(re)] = 0;
    for (std::size_t re = 0; re < kReasonCount; ++re) {
      const std::uint64_t n = sr[static_cast<std::size_t>(state)][re];
      if (n > 0) by_reason[to_string(reason_of(re))] = n;
      total += n;
    }
    return boost::json::object{{"total", total}, {"by_reason", std::move(by_reason)}};
  };
  boost::json::object minute;
  minute["window_s"] = kMinuteSeconds;
  boost::json::object completed = group(State::completed, {});
  const std::uint64_t completions = completed["total"].as_uint64();
  completed["on_time"] = completions - late;
  completed["late"] = late;
  minute["completed"] = std::move(completed);
  minute["failed"] = group(State::failed, {});
  minute["refused"] = group(State::rejected, {Reason::queue_full, Reason::deadline_implausible,
                                              Reason::budget_too_small, Reason::shed,
                                              Reason::shutting_down});
  minute["expired"] = group(State::expired, {Reason::expired_in_queue, Reason::too_late_to_start});
  boost::json::object cancelled = group(State::cancelled, {});
  boost::json::object by_cause;
  for (std::size_t c = 1; c < kCancelCauseCount; ++c) by_cause[to_string(cause_of(c))] = causes[c];
  cancelled["by_cause"] = std::move(by_cause);
  minute["cancelled"] = std::move(cancelled);
  minute["throughput_per_s"] = static_cast<double>(completions) / kMinuteSeconds;
  minute["goodput_per_s"] = static_cast<double>(completions - late) / kMinuteSeconds;
  r["last_minute"] = std::move(minute);

  // The chart's series: one count per second, oldest first.
  boost::json::array on_time, late_s, refused, expired, cancelled_s, failed;
  for (const LiveStats::Second& s : seconds) {
    auto sum = [&](State st) {
      std::uint64_t n = 0;
      for (const std::uint32_t c : s.by_state_reason[static_cast<std::size_t>(st)]) n += c;
      return n;
    };
    const std::uint64_t done = sum(State::completed);
    on_time.emplace_back(done - s.completed_late);
    late_s.emplace_back(s.completed_late);
    refused.emplace_back(sum(State::rejected));
    expired.emplace_back(sum(State::expired));
    cancelled_s.emplace_back(sum(State::cancelled));
    failed.emplace_back(sum(State::failed));
  }
  r["series"] = {{"step_s", 1},          {"on_time", std::move(on_time)},
                 {"late", std::move(late_s)}, {"refused", std::move(refused)},
                 {"expired", std::move(expired)}, {"cancelled", std::move(cancelled_s)},
                 {"failed", std::move(failed)}};

  boost::json::object estimates;
  for (const EstimateSnapshot& e : in.estimates) {
    estimates[e.key] = {{"kind", e.kind},       {"mean_ms", whole_ms(e.mean)},
                        {"tail_ms", whole_ms(e.tail)}, {"samples", e.samples},
                        {"kept", e.kept}};
  }
  r["estimates"] = std::move(estimates);

  boost::json::object bulkheads;
  for (const auto& [kind, limit] : in.options.kind_limits) {
    const auto it = running_by_kind.find(kind);
    bulkheads[kind] = {{"limit", limit}, {"running", it == running_by_kind.end() ? 0 : it->second}};
  }
  r["bulkheads"] = std::move(bulkheads);

  boost::json::array le;
  for (const std::int64_t b : LiveStats::kBucketsMs) le.emplace_back(b);
  r["histograms"] = {{"le_ms", std::move(le)},
                     {"budget", histogram_json(in.live.budget)},
                     {"remaining_at_start", histogram_json(in.live.remaining_at_start)},
                     {"remaining_at_end", histogram_json(in.live.remaining_at_end)},
                     {"remaining_at_end_late", in.live.remaining_at_end.late}};
  kinds_json(in.kind_metrics, r);
  return boost::json::serialize(r);
}

}  // namespace sandglass::daemon
