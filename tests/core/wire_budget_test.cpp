#include <sandglass/wire_budget.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

using namespace std::chrono_literals;
using sandglass::Duration;
using sandglass::WireBudget;

namespace {

bool contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

// Checks that `w` is an error naming `header`, with no budget.
void check_rejected(const WireBudget& w, std::string_view header) {
  CHECK_FALSE(w);
  CHECK_FALSE(w.budget.has_value());
  CAPTURE(w.error);
  CHECK(contains(w.error, header));
}

// Durations that are exactly representable in both wire formats (whole milliseconds whose
// grpc form uses a unit no coarser than the value's precision).
const std::vector<Duration> kExactDurations = {
    Duration::zero(), 1ms, 250ms, 2s, 90s, 90min, 24h, 99'999'999ms,
};

}  // namespace

TEST_SUITE("WireBudget") {
  TEST_CASE("the header names are the ones on the wire") {
    CHECK(sandglass::kRequestTimeoutHeader == "x-request-timeout-ms");
    CHECK(sandglass::kGrpcTimeoutHeader == "grpc-timeout");
  }

  TEST_CASE("x-request-timeout-ms parses non-negative integer milliseconds") {
    std::string_view value;
    Duration expected{};
    SUBCASE("zero") {
      value = "0";
      expected = Duration::zero();
    }
    SUBCASE("250") {
      value = "250";
      expected = 250ms;
    }
    SUBCASE("surrounded by spaces") {
      value = " 250 ";
      expected = 250ms;
    }
    SUBCASE("surrounded by tabs") {
      value = "\t250\t";
      expected = 250ms;
    }
    SUBCASE("leading zeros") {
      value = "0250";
      expected = 250ms;
    }
    SUBCASE("the largest value that fits in nanoseconds") {
      value = "9223372036854";
      expected = 9'223'372'036'854ms;
    }
    CAPTURE(value);
    const WireBudget w = sandglass::parse_request_timeout_ms(value);
    REQUIRE(w);
    CHECK(*w.budget == expected);
    CHECK(w.error == "");
  }

  TEST_CASE("malformed x-request-timeout-ms values are rejected with an error naming the header") {
    std::string_view value;
    SUBCASE("empty") { value = ""; }
    SUBCASE("only spaces") { value = "   "; }
    SUBCASE("negative") { value = "-5"; }
    SUBCASE("explicit plus sign") { value = "+5"; }
    SUBCASE("fraction") { value = "1.5"; }
    SUBCASE("with a unit") { value = "12ms"; }
    SUBCASE("letters") { value = "abc"; }
    SUBCASE("space inside the number") { value = "2 50"; }
    SUBCASE("hexadecimal") { value = "0x10"; }
    CAPTURE(value);
    check_rejected(sandglass::parse_request_timeout_ms(value), "x-request-timeout-ms");
  }

  TEST_CASE("a huge x-request-timeout-ms saturates to the largest duration") {
    std::string_view value;
    SUBCASE("one millisecond more than fits in nanoseconds") { value = "9223372036855"; }
    SUBCASE("more digits than an int64 holds") { value = "99999999999999999999999"; }
    CAPTURE(value);
    const WireBudget w = sandglass::parse_request_timeout_ms(value);
    REQUIRE(w);
    CHECK(*w.budget == Duration::max());
  }

  TEST_CASE("an error quotes the offending value with unprintable bytes replaced and long values "
            "cut") {
    SUBCASE("control and non-ASCII bytes") {
      const WireBudget w = sandglass::parse_request_timeout_ms("1\x01\xff");
      check_rejected(w, "x-request-timeout-ms");
      CHECK(contains(w.error, "'1?\?'"));
    }
    SUBCASE("a value longer than 32 bytes") {
      const std::string value = std::string(32, 'a') + "TAIL";
      const WireBudget w = sandglass::parse_grpc_timeout(value);
      check_rejected(w, "grpc-timeout");
      CHECK(contains(w.error, "'" + std::string(32, 'a') + "...'"));
      CHECK_FALSE(contains(w.error, "TAIL"));
    }
  }

  TEST_CASE("grpc-timeout parses every unit") {
    std::string_view value;
    Duration expected{};
    SUBCASE("hours") {
      value = "2H";
      expected = 2h;
    }
    SUBCASE("minutes") {
      value = "3M";
      expected = 3min;
    }
    SUBCASE("seconds") {
      value = "4S";
      expected = 4s;
    }
    SUBCASE("milliseconds") {
      value = "250m";
      expected = 250ms;
    }
    SUBCASE("microseconds") {
      value = "6u";
      expected = 6us;
    }
    SUBCASE("nanoseconds") {
      value = "7n";
      expected = 7ns;
    }
    CAPTURE(value);
    const WireBudget w = sandglass::parse_grpc_timeout(value);
    REQUIRE(w);
    CHECK(*w.budget == expected);
    CHECK(w.error == "");
  }

  TEST_CASE("grpc-timeout accepts one to eight digits") {
    std::string_view value;
    Duration expected{};
    SUBCASE("one digit") {
      value = "0S";
      expected = Duration::zero();
    }
    SUBCASE("eight digits") {
      value = "99999999n";
      expected = 99'999'999ns;
    }
    SUBCASE("eight digits with leading zeros") {
      value = "00000001S";
      expected = 1s;
    }
    SUBCASE("eight digits of minutes still fit without saturating") {
      value = "99999999M";
      expected = 99'999'999min;
    }
    CAPTURE(value);
    const WireBudget w = sandglass::parse_grpc_timeout(value);
    REQUIRE(w);
    CHECK(*w.budget == expected);
  }

  TEST_CASE("grpc-timeout with nine digits is rejected with an error naming the digit limit") {
    std::string_view value;
    SUBCASE("nine digits") { value = "100000000n"; }
    SUBCASE("nine digits with leading zeros") { value = "000000001S"; }
    CAPTURE(value);
    const WireBudget w = sandglass::parse_grpc_timeout(value);
    check_rejected(w, "grpc-timeout");
    CHECK(contains(w.error, "8 digits"));
  }

  TEST_CASE("malformed grpc-timeout values are rejected with an error naming the header") {
    std::string_view value;
    SUBCASE("empty") { value = ""; }
    SUBCASE("missing unit") { value = "5"; }
    SUBCASE("unit without digits") { value = "S"; }
    SUBCASE("unknown unit") { value = "5x"; }
    SUBCASE("lower-case s is not seconds") { value = "5s"; }
    SUBCASE("lower-case h is not hours") { value = "5h"; }
    SUBCASE("two units") { value = "5SS"; }
    SUBCASE("a multi-letter unit") { value = "5ms"; }
    SUBCASE("negative") { value = "-5S"; }
    SUBCASE("plus sign") { value = "+5S"; }
    SUBCASE("fraction") { value = "1.5S"; }
    SUBCASE("space between digits and unit") { value = "5 S"; }
    CAPTURE(value);
    check_rejected(sandglass::parse_grpc_timeout(value), "grpc-timeout");
  }

  TEST_CASE("a grpc-timeout too large for the clock saturates to the largest duration") {
    const WireBudget w = sandglass::parse_grpc_timeout("99999999H");
    REQUIRE(w);
    CHECK(*w.budget == Duration::max());
  }

  TEST_CASE("x-request-timeout-ms formats whole milliseconds rounded down") {
    CHECK(sandglass::format_request_timeout_ms(250ms) == "250");
    CHECK(sandglass::format_request_timeout_ms(2s) == "2000");
    CHECK(sandglass::format_request_timeout_ms(Duration::zero()) == "0");
    CHECK(sandglass::format_request_timeout_ms(999us) == "0");
    CHECK(sandglass::format_request_timeout_ms(1ms - 1ns) == "0");
    CHECK(sandglass::format_request_timeout_ms(2ms - 1ns) == "1");
    CHECK(sandglass::format_request_timeout_ms(Duration::max()) == "9223372036854");
  }

  TEST_CASE("a negative budget formats as zero") {
    Duration budget{};
    SUBCASE("minus one nanosecond") { budget = -1ns; }
    SUBCASE("minus one second") { budget = -1s; }
    SUBCASE("the most negative duration") { budget = Duration::min(); }
    CAPTURE(budget.count());
    CHECK(sandglass::format_request_timeout_ms(budget) == "0");
    CHECK(sandglass::format_grpc_timeout(budget) == "0n");
  }

  TEST_CASE("grpc-timeout formats with the finest unit that fits in eight digits rounded down") {
    CHECK(sandglass::format_grpc_timeout(Duration::zero()) == "0n");
    CHECK(sandglass::format_grpc_timeout(1ns) == "1n");
    CHECK(sandglass::format_grpc_timeout(99'999'999ns) == "99999999n");
    CHECK(sandglass::format_grpc_timeout(100'000'000ns) == "100000u");
    CHECK(sandglass::format_grpc_timeout(100'000'999ns) == "100000u");
    CHECK(sandglass::format_grpc_timeout(250ms) == "250000u");
    CHECK(sandglass::format_grpc_timeout(2s) == "2000000u");
    CHECK(sandglass::format_grpc_timeout(99'999'999'999ns) == "99999999u");
    CHECK(sandglass::format_grpc_timeout(100s) == "100000m");
    CHECK(sandglass::format_grpc_timeout(100'000s) == "100000S");
    CHECK(sandglass::format_grpc_timeout(100'000'000s) == "1666666M");
    CHECK(sandglass::format_grpc_timeout(100'000'000min) == "1666666H");
    CHECK(sandglass::format_grpc_timeout(Duration::max()) == "2562047H");
  }

  TEST_CASE("a formatted grpc-timeout has one to eight digits and one known unit") {
    const std::vector<Duration> budgets = {
        Duration::zero(), 1ns,  99'999'999ns, 100'000'000ns, 1s - 1ns,      1s,
        99'999'999ms,     100'000'000ms,      99'999'999s,   100'000'000s, 99'999'999min,
        100'000'000min,   Duration::max() - 1ns, Duration::max()};
    for (const Duration d : budgets) {
      CAPTURE(d.count());
      const std::string text = sandglass::format_grpc_timeout(d);
      CAPTURE(text);
      REQUIRE(text.size() >= 2);
      const std::string_view digits = std::string_view{text}.substr(0, text.size() - 1);
      CHECK(digits.size() <= 8);
      CHECK(std::ranges::all_of(digits, [](char c) { return c >= '0' && c <= '9'; }));
      CHECK(std::string_view{"HMSmun"}.find(text.back()) != std::string_view::npos);
    }
  }

  TEST_CASE("a formatted budget parses back to at most the original and never more") {
    const std::vector<Duration> budgets = {
        1ns,          999ns, 1us + 1ns,     100'000'001ns,     1s + 1ns,   100s + 1us,
        100'000s + 1ms, 100'000'000s + 1s, Duration::max() - 1ns, Duration::max()};
    for (const Duration d : budgets) {
      CAPTURE(d.count());
      const WireBudget grpc = sandglass::parse_grpc_timeout(sandglass::format_grpc_timeout(d));
      REQUIRE(grpc);
      CHECK(*grpc.budget <= d);
      const WireBudget ms =
          sandglass::parse_request_timeout_ms(sandglass::format_request_timeout_ms(d));
      REQUIRE(ms);
      CHECK(*ms.budget <= d);
    }
  }

  TEST_CASE("a budget that loses precision on the wire parses back strictly smaller") {
    const WireBudget grpc = sandglass::parse_grpc_timeout(sandglass::format_grpc_timeout(
        100'000'001ns));
    REQUIRE(grpc);
    CHECK(*grpc.budget == 100'000'000ns);
    const WireBudget ms =
        sandglass::parse_request_timeout_ms(sandglass::format_request_timeout_ms(2ms - 1ns));
    REQUIRE(ms);
    CHECK(*ms.budget == 1ms);
  }

  TEST_CASE("a budget representable exactly on the wire parses back unchanged") {
    for (const Duration d : kExactDurations) {
      CAPTURE(d.count());
      const std::string grpc_text = sandglass::format_grpc_timeout(d);
      CAPTURE(grpc_text);
      const WireBudget grpc = sandglass::parse_grpc_timeout(grpc_text);
      REQUIRE(grpc);
      CHECK(*grpc.budget == d);
      const WireBudget ms =
          sandglass::parse_request_timeout_ms(sandglass::format_request_timeout_ms(d));
      REQUIRE(ms);
      CHECK(*ms.budget == d);
    }
    for (const Duration d : std::initializer_list<Duration>{1ns, 99'999'999ns, 1us, 1'500us}) {
      CAPTURE(d.count());
      const WireBudget grpc = sandglass::parse_grpc_timeout(sandglass::format_grpc_timeout(d));
      REQUIRE(grpc);
      CHECK(*grpc.budget == d);
    }
  }
}
