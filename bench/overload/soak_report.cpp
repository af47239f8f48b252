#include "soak_report.hpp"

#include "report.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <fmt/core.h>

#include <cmath>
#include <fstream>

namespace sandglass::bench {
namespace {

namespace json = boost::json;

std::string opt(const std::optional<double>& v, const char* unit) {
  return v ? fmt::format("{:.1f} {}", *v, unit) : std::string{"-"};
}

json::value num(double v, int digits = 3) {
  if (!std::isfinite(v)) return nullptr;
  const double scale = std::pow(10.0, digits);
  return std::round(v * scale) / scale;
}
json::value num(const std::optional<double>& v, int digits = 3) {
  return v ? num(*v, digits) : json::value(nullptr);
}

json::object counts_json(const JobCounts& c) {
  json::object o{{"submitted", c.submitted}};
  for (const auto& [state, n] : c.by_state) o[state] = n;
  return o;
}

std::string counts_text(const JobCounts& c) {
  std::string out = fmt::format("submitted={}", c.submitted);
  for (const auto& [state, n] : c.by_state) out += fmt::format(" {}={}", state, n);
  return out;
}

const char* verdict(bool ok) { return ok ? "ok" : "FAILED"; }

}  // namespace

void print_soak(std::FILE* out, const SoakReport& r) {
  const SoakFigures& s = r.soak;
  const Options& o = *r.options;
  fmt::print(out, "# {}\n", o.command_line);
  fmt::print(out, "# daemon: {}; {} workers, queue capacity {}, {} jobs, service {}, deadline {}\n",
             s.daemon, o.workers, o.capacity, to_string(o.body), o.service.describe(),
             o.deadline.describe());
  fmt::print(out, "# load average: {} at start, {} at end\n", r.load_at_start, r.load_at_end);
  fmt::print(out, "{:<28} {}\n", "figure", "value");
  fmt::print(out, "{:<28} {:.0f} jobs/s\n", "capacity", s.capacity_per_s);
  fmt::print(out, "{:<28} {:.0f}x = {:.0f} jobs/s for {:.0f} s ({} arrivals)\n", "offered", s.load,
             s.offered_per_s, s.seconds, s.arrivals);
  fmt::print(out, "{:<28} {:.4f} ({} on time; {:.3f} of capacity)\n", "goodput (on time / offered)",
             s.goodput, s.on_time, s.goodput_ratio);
  fmt::print(out, "{:<28} {} / {} (p50 / p99 of {} rejections)\n", "rejection latency",
             opt(s.rejection_p50_us, "us"), opt(s.rejection_p99_us, "us"), s.rejected);
  fmt::print(out, "{:<28} {} / {}\n", "on-time latency p50 / p99", opt(s.latency_p50_ms, "ms"),
             opt(s.latency_p99_ms, "ms"));
  fmt::print(out, "{:<28} late {}, expired {}, cancelled {}, failed {} (transport errors {}, no free connection {})\n",
             "other fates", s.completed_late, s.expired, s.cancelled, s.failed, s.transport_errors,
             s.no_free_connection);
  if (!s.first_error.empty()) fmt::print(out, "{:<28} {}\n", "first client error", s.first_error);
  fmt::print(out, "{:<28} {:.1f} / {:.1f} / {:.1f} MiB (start after {:.0f} s warm-up / peak / end; bound start + {:.0f} MiB; {} samples) {}\n",
             "RSS start / peak / end", s.rss_start_mib, s.rss_peak_mib, s.rss_end_mib,
             std::chrono::duration<double>{o.soak_warm_up}.count(), s.rss_bound_mib, s.samples,
             verdict(s.rss_ok));
  fmt::print(out, "{:<28} {} / {} / {} (idle before / peak / idle after) {}\n", "fds start / peak / end",
             s.fds_start, s.fds_peak, s.fds_end, verdict(s.fds_ok));
  if (!s.consistent) fmt::print(out, "{:<28} FAILED: an arrival has no fate or two\n", "accounting");
  const SigtermFigures& t = r.sigterm;
  if (t.ran) {
    fmt::print(out, "{:<28} at {:.1f} s of a {:.1f} s overload ({} arrivals)\n", "SIGTERM", t.signal_after_s,
               t.phase_s, t.arrivals);
    fmt::print(out, "{:<28} {} after {:.3f} s (bound {:.1f} s: drain timeout {} ms + 10 s for answers + 5 s)\n",
               "exit", t.exit_code ? fmt::format("code {}", *t.exit_code) : std::string{"none"},
               t.exit_after_s, t.exit_bound_s, o.drain_timeout.count());
    fmt::print(out, "{:<28} {}\n", "client answers", counts_text(t.client));
    fmt::print(out, "{:<28} {}\n", "daemon's drain summary", counts_text(t.daemon));
    fmt::print(out, "{:<28} {} (requests the daemon never took: refused or closed connections)\n",
               "not taken", t.transport_errors);
    fmt::print(out, "{:<28} {}\n", "refusals without answer", t.refusals_unanswered);
    fmt::print(out, "{:<28} {}\n", "SIGTERM accounting", t.problem.empty() ? "ok" : "FAILED: " + t.problem);
  }
  fmt::print(out, "# {}\n", r.ok() ? "all checks held" : "FAILED");
}

bool write_soak_json(const std::string& path, const SoakReport& r, std::string& error) {
  const SoakFigures& s = r.soak;
  const Options& o = *r.options;
  json::object soak{
      {"daemon", s.daemon},
      {"capacity_per_s", num(s.capacity_per_s, 1)},
      {"load", num(s.load)},
      {"seconds", num(s.seconds)},
      {"arrivals", s.arrivals},
      {"offered_per_s", num(s.offered_per_s, 1)},
      {"on_time", s.on_time},
      {"goodput", num(s.goodput, 4)},
      {"goodput_ratio", num(s.goodput_ratio, 4)},
      {"rejected", s.rejected},
      {"rejection_latency_p50_us", num(s.rejection_p50_us, 1)},
      {"rejection_latency_p99_us", num(s.rejection_p99_us, 1)},
      {"latency_p50_ms", num(s.latency_p50_ms)},
      {"latency_p99_ms", num(s.latency_p99_ms)},
      {"completed_late", s.completed_late},
      {"expired", s.expired},
      {"cancelled", s.cancelled},
      {"failed", s.failed},
      {"transport_errors", s.transport_errors},
      {"no_free_connection", s.no_free_connection},
      {"first_error", s.first_error},
      {"rss_start_mib", num(s.rss_start_mib, 1)},
      {"rss_peak_mib", num(s.rss_peak_mib, 1)},
      {"rss_end_mib", num(s.rss_end_mib, 1)},
      {"rss_bound_mib", num(s.rss_bound_mib, 1)},
      {"rss_samples", s.samples},
      {"fds_start", s.fds_start},
      {"fds_peak", s.fds_peak},
      {"fds_end", s.fds_end},
      {"rss_ok", s.rss_ok},
      {"fds_ok", s.fds_ok},
      {"consistent", s.consistent}};
  json::array series;
  for (const auto& [at_s, rss_mib, fds] : s.series) series.push_back(json::array{num(at_s, 1), num(rss_mib, 2), fds});
  soak["samples"] = std::move(series);  // [seconds since the soak began, RSS MiB, fds]
  json::object root{{"command", o.command_line},
                    {"settings",
                     {{"workers", o.workers},
                      {"capacity", o.capacity},
                      {"body", std::string{to_string(o.body)}},
                      {"service", o.service.describe()},
                      {"deadline", o.deadline.describe()},
                      {"warm_up_s", num(std::chrono::duration<double>{o.soak_warm_up}.count())},
                      {"drain_timeout_ms", o.drain_timeout.count()}}},
                    {"load_average_at_start", r.load_at_start},
                    {"load_average_at_end", r.load_at_end},
                    {"soak", std::move(soak)},
                    {"ok", r.ok()}};
  const SigtermFigures& t = r.sigterm;
  if (t.ran) {
    root["sigterm"] = json::object{
        {"phase_s", num(t.phase_s)},
        {"signal_after_s", num(t.signal_after_s)},
        {"arrivals", t.arrivals},
        {"exit_code", t.exit_code ? json::value(*t.exit_code) : json::value(nullptr)},
        {"exit_after_s", num(t.exit_after_s)},
        {"exit_bound_s", num(t.exit_bound_s)},
        {"client_answers", counts_json(t.client)},
        {"daemon_counts", counts_json(t.daemon)},
        {"not_taken", t.transport_errors},
        {"other_answers", t.other_answers},
        {"refusals_unanswered", t.refusals_unanswered},
        {"problem", t.problem}};
  }
  std::ofstream file{path};
  file << json::serialize(root) << '\n';
  if (!file) {
    error = "cannot write " + path;
    return false;
  }
  return true;
}

}  // namespace sandglass::bench
