// sleep {"ms": N}: waits N ms on the job's own sleep, which cancellation interrupts at once.
#include "kinds/builtin_kinds.hpp"

#include <boost/json/serialize.hpp>

#include <chrono>

namespace sandglass::daemon {

JobKind make_sleep_kind() {
  return {.prepare = [](const boost::json::object& args) -> JobHandler {
    reject_unknown_keys(args, {"ms"});
    const std::chrono::milliseconds ms{require_int(args, "ms", 0, 86'400'000)};
    return [ms](JobContext& ctx) {
      ctx.sleep_for(ms);
      ctx.set_result(boost::json::serialize(boost::json::object{{"slept_ms", ms.count()}}));
    };
  }};
}

}  // namespace sandglass::daemon
