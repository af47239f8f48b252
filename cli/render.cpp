#include "cli/render.hpp"

#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <fmt/format.h>

#include <string_view>

namespace sandglass::cli {
namespace {

using boost::json::object;
using boost::json::value;

const value* field(const object& o, std::string_view key) { return o.if_contains(key); }

std::string text(const object& o, std::string_view key, std::string_view otherwise = "-") {
  const value* v = field(o, key);
  if (v == nullptr || v->is_null()) return std::string{otherwise};
  if (v->is_string()) return std::string{v->get_string()};
  return boost::json::serialize(*v);
}

const object& object_at(const object& o, std::string_view key) {
  static const object kEmpty;
  const value* v = field(o, key);
  return v != nullptr && v->is_object() ? v->get_object() : kEmpty;
}

// "critical 0, high 2" for an object of numbers; "-" when empty.
std::string counts(const object& o) {
  std::string out;
  for (const auto& [k, v] : o)
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", std::string_view{k},
                       boost::json::serialize(v));
  return out.empty() ? "-" : out;
}

std::string timings_line(const object& t) {
  return fmt::format("budget {} ms = intake {} + queue {} + run {} + remaining {} ms (+ reserve)",
                     text(t, "budget_ms"), text(t, "intake_ms", "0"), text(t, "queue_ms", "0"),
                     text(t, "run_ms", "0"), text(t, "remaining_ms", "0"));
}

// "failed (handler_error), completed (ok)": each attempt's state and reason.
std::string attempts_line(const boost::json::array& attempts) {
  std::string out;
  for (const value& a : attempts) {
    if (!a.is_object()) continue;
    out += fmt::format("{}{} ({})", out.empty() ? "" : ", ", text(a.get_object(), "state"),
                       text(a.get_object(), "reason"));
  }
  return out;
}

}  // namespace

std::string render_record(const object& r) {
  const std::string state = text(r, "state");
  std::string out = fmt::format("job {}", text(r, "id"));
  if (field(r, "kind") != nullptr) out += fmt::format(" {}", text(r, "kind"));
  out += ": " + state;
  std::string why;
  if (const value* reason = field(r, "reason"); reason != nullptr && !reason->is_null()) {
    why = text(r, "reason");
  }
  if (field(r, "cause") != nullptr)
    why += fmt::format("{}cause {}", why.empty() ? "" : ", ", text(r, "cause"));
  if (!why.empty()) out += fmt::format(" ({})", why);
  if (state == "running" && field(r, "worker") != nullptr) {
    out += fmt::format(" on worker {}", text(r, "worker"));
  }
  out += "\n";
  if (const value* w = field(r, "waiters"); w != nullptr && w->is_int64() && w->get_int64() > 0) {
    out += fmt::format("  waiters    {}\n", w->get_int64());
  }
  if (const value* c = field(r, "committed"); c != nullptr && c->is_bool() && c->get_bool()) {
    out += "  committed  yes: past its commit point\n";
  }
  if (field(r, "result") != nullptr) out += fmt::format("  result     {}\n", text(r, "result"));
  if (field(r, "error") != nullptr) out += fmt::format("  error      {}\n", text(r, "error"));
  if (const value* a = field(r, "attempts"); a != nullptr && a->is_array() && !a->get_array().empty()) {
    out += fmt::format("  attempts   {}: {}\n", a->get_array().size(), attempts_line(a->get_array()));
  }
  if (field(r, "retry_stopped") != nullptr) {
    out += fmt::format("  retries    stopped: {}\n", text(r, "retry_stopped"));
  }
  if (field(r, "timings") != nullptr)
    out += fmt::format("  timings    {}\n", timings_line(object_at(r, "timings")));
  return out;
}

std::string render_listing(const object& listing) {
  std::string out =
      fmt::format("{:<8} {:<10} {:<10} {:<34} {:>9} {:>8} {:>8} {:>12}\n", "ID", "KIND", "STATE",
                  "REASON", "BUDGET_MS", "QUEUE_MS", "RUN_MS", "REMAINING_MS");
  const value* jobs = field(listing, "jobs");
  if (jobs != nullptr && jobs->is_array()) {
    for (const value& j : jobs->get_array()) {
      if (!j.is_object()) continue;
      const object& r = j.get_object();
      const object& t = object_at(r, "timings");
      std::string why = text(r, "reason");
      if (field(r, "cause") != nullptr) why += fmt::format("/{}", text(r, "cause"));
      out += fmt::format("{:<8} {:<10} {:<10} {:<34} {:>9} {:>8} {:>8} {:>12}\n", text(r, "id"),
                         text(r, "kind"), text(r, "state"), why, text(t, "budget_ms"),
                         text(t, "queue_ms"), text(t, "run_ms"), text(t, "remaining_ms"));
    }
  }
  if (const value* next = field(listing, "next_cursor"); next != nullptr && !next->is_null()) {
    out += fmt::format("next page: --cursor {}\n", text(listing, "next_cursor"));
  }
  return out;
}

std::string render_batch(const object& answer) {
  std::string out;
  const value* jobs = field(answer, "jobs");
  if (jobs == nullptr || !jobs->is_array()) return out;
  for (const value& j : jobs->get_array()) {
    if (!j.is_object()) continue;
    const object& item = j.get_object();
    if (field(item, "state") == nullptr) {  // refused as a request: 409 for a key's conflict
      out += fmt::format("job {}: error {}{} (HTTP {})\n", text(item, "id"),
                         field(item, "field") != nullptr ? text(item, "field") + ": " : "",
                         text(item, "error"), text(item, "status"));
      continue;
    }
    out += fmt::format("job {}: {}", text(item, "id"), text(item, "state"));
    if (const value* reason = field(item, "reason"); reason != nullptr && !reason->is_null()) {
      out += fmt::format(" ({})", text(item, "reason"));
    }
    out += "\n";
  }
  return out;
}

std::string render_stats(const object& s) {
  const object& capacity = object_at(s, "capacity");
  const object& queue = object_at(s, "queue");
  const object& running = object_at(s, "running");
  const object& minute = object_at(s, "last_minute");
  const auto total = [&](std::string_view group) {
    return text(object_at(minute, group), "total", "0");
  };
  std::string out;
  out += fmt::format("workers {}   queue {} of {} (peak {})   submitted {}{}\n",
                     text(capacity, "workers"), text(queue, "depth", "0"), text(capacity, "queue"),
                     text(queue, "peak", "0"), text(s, "submitted_total", "0"),
                     text(s, "draining", "false") == "true" ? "   DRAINING" : "");
  out += fmt::format("queued by class   {}\n", counts(object_at(queue, "by_class")));
  out += fmt::format("running           {} ({}), overrunning {}\n", text(running, "total", "0"),
                     counts(object_at(running, "by_kind")), text(running, "overrunning", "0"));
  const object& completed = object_at(minute, "completed");
  out += fmt::format(
      "last {} s         completed {} (on time {}, late {}), failed {}, refused {}, "
      "expired {}, cancelled {}\n",
      text(minute, "window_s", "60"), total("completed"), text(completed, "on_time", "0"),
      text(completed, "late", "0"), total("failed"), total("refused"), total("expired"),
      total("cancelled"));
  const auto per_s = [&](std::string_view key) {
    const value* v = field(minute, key);
    return v != nullptr && v->is_number() ? fmt::format("{:.2f}/s", v->to_number<double>())
                                          : std::string{"-"};
  };
  out += fmt::format("                  throughput {}, goodput {}\n", per_s("throughput_per_s"),
                     per_s("goodput_per_s"));
  for (std::string_view group : {"failed", "refused", "expired", "cancelled"}) {
    const object& by_reason = object_at(object_at(minute, group), "by_reason");
    std::string nonzero;
    for (const auto& [k, v] : by_reason) {
      if (v.is_number() && v.to_number<double>() > 0) {
        nonzero += fmt::format("{}{} {}", nonzero.empty() ? "" : ", ", std::string_view{k},
                               boost::json::serialize(v));
      }
    }
    if (!nonzero.empty()) out += fmt::format("  {:<15} {}\n", group, nonzero);
  }
  const object& estimates = object_at(s, "estimates");
  if (!estimates.empty()) out += "estimates (run time per key)\n";
  for (const auto& [key, v] : estimates) {
    if (!v.is_object()) continue;
    const object& e = v.get_object();
    out += fmt::format("  {:<24} mean {} ms, tail {} ms, {} samples\n", std::string_view{key},
                       text(e, "mean_ms"), text(e, "tail_ms"), text(e, "samples"));
  }
  return out;
}

}  // namespace sandglass::cli
