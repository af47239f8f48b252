// Fuzzes the wire budget parsers (x-request-timeout-ms, grpc-timeout) and their formatters.
//
// The input is a header value. Each parser either yields a non-negative budget or an error that
// quotes the value in printable ASCII; never both. Formatting a parsed budget and parsing it
// again never yields more (a propagated budget must not grow). The first eight bytes, read as
// a nanosecond count, are also formatted: the text parses and is at most that budget.
#include "fuzz_check.hpp"

#include <sandglass/wire_budget.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace {

using sandglass::Duration;
using sandglass::WireBudget;

void check_result(const WireBudget& b) {
  FUZZ_CHECK(b.budget.has_value() == b.error.empty());
  if (b) {
    FUZZ_CHECK(*b.budget >= Duration::zero());
    return;
  }
  // Header name, what is wrong, and at most 32 quoted bytes: no raw bytes, bounded length.
  FUZZ_CHECK(b.error.size() <= 160);
  for (char c : b.error) FUZZ_CHECK(c >= 0x20 && c < 0x7f);
}

void check_formats(Duration budget) {
  const Duration wanted = budget < Duration::zero() ? Duration::zero() : budget;
  const WireBudget ms = sandglass::parse_request_timeout_ms(sandglass::format_request_timeout_ms(budget));
  FUZZ_CHECK(ms && *ms.budget <= wanted);
  const std::string grpc_text = sandglass::format_grpc_timeout(budget);
  FUZZ_CHECK(grpc_text.size() >= 2 && grpc_text.size() <= 9);
  const WireBudget grpc = sandglass::parse_grpc_timeout(grpc_text);
  FUZZ_CHECK(grpc && *grpc.budget <= wanted);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view value{reinterpret_cast<const char*>(data), size};

  const WireBudget ms = sandglass::parse_request_timeout_ms(value);
  check_result(ms);
  if (ms) check_formats(*ms.budget);

  const WireBudget grpc = sandglass::parse_grpc_timeout(value);
  check_result(grpc);
  if (grpc) check_formats(*grpc.budget);

  if (size >= sizeof(std::int64_t)) {
    std::int64_t ns = 0;
    std::memcpy(&ns, data, sizeof ns);
    check_formats(std::chrono::duration_cast<Duration>(std::chrono::nanoseconds{ns}));
  }
  return 0;
}
