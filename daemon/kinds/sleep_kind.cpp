// sleep {"ms": N, "commit_at_ms"?: M}: waits N ms on the job's own sleep, which cancellation
// interrupts at once. With commit_at_ms it marks its commit point after M ms: from then on a
// cancellation no longer stops it and the outcome says completed_after_cancel (a stand-in for
// work that has made its effect durable). Its `ms` is its size hint (JobKind::expected).
#include "daemon/kinds/builtin_kinds.hpp"

#include <boost/json/serialize.hpp>

#include <chrono>

namespace sandglass::daemon {

std::chrono::milliseconds own_duration_ms(const boost::json::object& args) {
  constexpr std::int64_t kDay = 86'400'000;
  return std::chrono::milliseconds{require_int(args, "ms", 0, kDay)};
}

JobKind make_sleep_kind() {
  return {.prepare = [](const boost::json::object& args) -> JobHandler {
    reject_unknown_keys(args, {"ms", "commit_at_ms"});
    const std::chrono::milliseconds ms = own_duration_ms(args);
    const std::chrono::milliseconds commit_at{optional_int(args, "commit_at_ms", -1, 0, ms.count())};
    return [ms, commit_at](JobContext& ctx) {
      const Deadline until = Deadline::after(ms);
      if (commit_at.count() >= 0) {
        ctx.sleep_for(commit_at);
        ctx.commit();
      }
      ctx.sleep_until(until);
      boost::json::object result{{"slept_ms", ms.count()}};
      if (ctx.committed()) result["committed"] = true;
      ctx.set_result(boost::json::serialize(result));
    };
  },
          .expected = own_duration_ms};
}

}  // namespace sandglass::daemon
