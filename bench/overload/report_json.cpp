// The JSON file: one object per (policy, load) under "results" (see report.hpp).
#include "report.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>
#include <boost/json/value.hpp>

#include <fmt/core.h>

#include <cmath>
#include <fstream>

namespace sandglass::bench {
namespace {

namespace json = boost::json;

// Rounded so the file stays readable; nulls for what was not measured.
json::value num(double v, int digits = 4) {
  if (!std::isfinite(v)) return nullptr;
  const double scale = std::pow(10.0, digits);
  return std::round(v * scale) / scale;
}
json::value num(const std::optional<double>& v, int digits = 4) {
  return v ? num(*v, digits) : json::value(nullptr);
}

// JSON text like json::serialize, but doubles in their shortest form (0.9997, not 9.997E-1).
std::string compact(const json::value& v) {
  switch (v.kind()) {
    case json::kind::double_:
      return fmt::format("{}", v.get_double());
    case json::kind::array: {
      // Appended piece by piece: `(first ? "" : ",") + text` trips a false -Wrestrict inside
      // std::string::insert with GCC 12 at -O3.
      std::string out = "[";
      for (const json::value& e : v.get_array()) {
        if (out.size() > 1) out += ',';
        out += compact(e);
      }
      return out + "]";
    }
    case json::kind::object: {
      std::string out = "{";
      for (const auto& [key, e] : v.get_object()) {
        if (out.size() > 1) out += ',';
        out += json::serialize(json::string{key});
        out += ':';
        out += compact(e);
      }
      return out + "}";
    }
    default:
      return json::serialize(v);
  }
}

json::object point_json(const PointResult& r) {
  json::object rejected;
  for (Reason reason : {Reason::queue_full, Reason::deadline_implausible, Reason::shed,
                        Reason::budget_too_small, Reason::shutting_down}) {
    rejected[to_string(reason)] = r.rejected[static_cast<std::size_t>(reason)];
  }
  return {{"policy", r.policy},
          {"load", num(r.load)},
          {"offered_per_s", num(r.offered_per_s, 1)},
          {"goodput_per_s", num(r.goodput_per_s, 1)},
          {"goodput_ratio", num(r.goodput_ratio)},
          {"admitted", r.admitted},
          {"rejected", std::move(rejected)},
          {"expired_in_queue", r.expired_in_queue},
          {"cancelled_while_running", r.cancelled_while_running},
          {"completed_late", r.completed_late},
          {"wasted_work_ratio", num(r.wasted_work_ratio)},
          {"admitted_then_dropped", r.admitted_then_dropped},
          {"admitted_then_dropped_ratio", num(r.admitted_then_dropped_ratio)},
          {"latency_p50_ms", num(r.latency_p50_ms, 3)},
          {"latency_p99_ms", num(r.latency_p99_ms, 3)},
          {"latency_p999_ms", num(r.latency_p999_ms, 3)},
          {"latency_share_of_budget_p50", num(r.latency_share_p50, 3)},
          {"latency_share_of_budget_p99", num(r.latency_share_p99, 3)},
          {"rejection_latency_p99_us", num(r.rejection_latency_p99_us, 1)},
          {"peak_queue_depth", r.peak_queue_depth},
          {"peak_rss_mib", num(r.peak_rss_mib, 1)}};
}

json::object diagnostics_json(const PointResult& r) {
  return {{"policy", r.policy},
          {"load", num(r.load)},
          {"arrivals", r.arrivals},
          {"on_time", r.on_time},
          {"failed", r.failed},
          {"abandoned_at_end", r.abandoned},
          {"too_late_to_start", r.too_late_to_start},
          {"utilization", num(r.utilization)},
          {"generator_lag_p99_us", num(r.generator_lag_p99_us, 1)},
          {"consistent", r.consistent}};
}

json::object spike_json(const SpikeResult& s) {
  json::array steps;
  for (std::size_t k = 0; k < s.recovery.size(); ++k) {
    json::value recovery(nullptr);
    if (s.recovery[k]) recovery = num(std::chrono::duration<double, std::milli>{*s.recovery[k]}.count(), 1);
    steps.push_back(json::object{{"step", k + 1},
                                 {"target_goodput_per_s", num(s.targets_per_s[k], 1)},
                                 {"recovery_ms", recovery}});
  }
  json::array steady;
  for (double v : s.phase_steady_per_s) steady.push_back(num(v, 1));
  return {{"policy", s.policy},
          {"phase_loads", json::array{0.8, 1.4, 0.8}},
          {"steady_goodput_per_s", std::move(steady)},
          {"steps", std::move(steps)},
          {"window_ms", num(std::chrono::duration<double, std::milli>{s.window}.count(), 1)}};
}

}  // namespace

bool write_json(const std::string& path, const RunInfo& info, std::span<const PointResult> points,
                std::span<const SpikeResult> spikes, std::string& error) {
  const Options& o = *info.options;
  json::array results;
  json::array diagnostics;
  for (const PointResult& r : points) {
    results.push_back(point_json(r));
    diagnostics.push_back(diagnostics_json(r));
  }
  json::array spike;
  for (const SpikeResult& s : spikes) spike.push_back(spike_json(s));
  json::object doc{
      {"bench", "sandglass-overload"},
      {"command", o.command_line},
      {"mode", info.mode},
      {"machine",
       {{"cores", info.machine.cores},
        {"cpu", info.machine.cpu},
        {"kernel", info.machine.kernel},
        {"load_average_at_start", info.load_at_start},
        {"load_average_at_end", info.load_at_end}}},
      {"settings",
       {{"workers", o.workers},
        {"capacity", o.capacity},
        {"body", to_string(o.body)},
        {"service", o.service.describe()},
        {"deadline", o.deadline.describe()},
        {"duration", format_duration(o.duration)},
        {"seed", o.seed},
        {"estimate_quantile", o.estimate_quantile},
        {"estimate_max_age", format_duration(o.estimate_max_age)},
        {"drop_if_cannot_finish", o.drop_if_cannot_finish},
        {"hints", o.hints.describe()},
        {"stall", o.stall.on() ? format_duration(o.stall.length) + "@" + format_duration(o.stall.period)
                               : std::string{}},
        {"target", o.target}}},
      {"capacity_per_s", num(info.capacity_per_s, 1)},
      {"capacity_note", info.capacity_note},
      {"results", std::move(results)},
      {"spike", std::move(spike)},
      {"diagnostics", std::move(diagnostics)}};
  std::ofstream out{path};
  if (!out) {
    error = "cannot write " + path;
    return false;
  }
  // One result per line: diffs of a re-run stay readable.
  out << "{\n";
  bool first = true;
  for (const auto& [key, value] : doc) {
    out << (first ? "" : ",\n") << "  " << json::serialize(json::string{key}) << ": ";
    first = false;
    if (value.is_array() && !value.as_array().empty() && value.as_array()[0].is_object()) {
      out << "[\n";
      const json::array& a = value.as_array();
      for (std::size_t i = 0; i < a.size(); ++i) {
        out << "    " << compact(a[i]) << (i + 1 < a.size() ? ",\n" : "\n");
      }
      out << "  ]";
    } else {
      out << compact(value);
    }
  }
  out << "\n}\n";
  if (!out) {
    error = "cannot write " + path;
    return false;
  }
  return true;
}

}  // namespace sandglass::bench
