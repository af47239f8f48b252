// spin {"ms": N}: burns CPU for N ms of wall time, with a checkpoint at least every 100 us.
// Its `ms` is its size hint (JobKind::expected).
#include "daemon/kinds/builtin_kinds.hpp"

#include <boost/json/serialize.hpp>

#include <chrono>
#include <cstdint>

namespace sandglass::daemon {
namespace {

// About 10 us of arithmetic between clock reads; the clock is read before every checkpoint.
std::uint64_t churn(std::uint64_t x) {
  for (int i = 0; i < 2000; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  return x;
}

}  // namespace

JobKind make_spin_kind() {
  return {.prepare = [](const boost::json::object& args) -> JobHandler {
    reject_unknown_keys(args, {"ms"});
    const std::chrono::milliseconds ms = own_duration_ms(args);
    return [ms](JobContext& ctx) {
      const TimePoint until = Clock::now() + ms;
      std::uint64_t x = ctx.id();
      std::uint64_t rounds = 0;
      while (Clock::now() < until) {
        ctx.checkpoint();
        x = churn(x);
        ++rounds;
      }
      ctx.set_result(boost::json::serialize(
          boost::json::object{{"spun_ms", ms.count()}, {"rounds", rounds}, {"x", x & 0xffff}}));
    };
  },
          .expected = own_duration_ms};
}

}  // namespace sandglass::daemon
