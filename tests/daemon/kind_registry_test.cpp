#include <sandglass/daemon/kind_registry.hpp>

#include <doctest/doctest.h>

#include <boost/json/parse.hpp>

#include <string>

using sandglass::daemon::ArgsError;
using sandglass::daemon::require_int;

namespace {

boost::json::object args_of(const std::string& json) { return boost::json::parse(json).as_object(); }

std::string field_of_error(const std::string& json) {
  try {
    require_int(args_of(json), "ms", 0, 1000);
  } catch (const ArgsError& e) {
    return e.field();
  }
  return "no error";
}

}  // namespace

TEST_SUITE("KindRegistry argument helpers") {
  TEST_CASE("require_int accepts a whole double and rejects a fraction") {
    CHECK(require_int(args_of(R"({"ms":5.0})"), "ms", 0, 1000) == 5);
    CHECK(field_of_error(R"({"ms":5.5})") == "args.ms");
  }

  TEST_CASE("require_int rejects doubles beyond the int64 range without undefined behaviour") {
    // Found by fuzz_job_request: the cast of 1.8e23 to int64 was undefined behaviour.
    CHECK(field_of_error(R"({"ms":184467440737095516151615})") == "args.ms");
    CHECK(field_of_error(R"({"ms":1e300})") == "args.ms");
    CHECK(field_of_error(R"({"ms":-1e300})") == "args.ms");
    CHECK(field_of_error(R"({"ms":9223372036854775808.0})") == "args.ms");
    CHECK(field_of_error(R"({"ms":-9223372036854775808.0})") == "args.ms");  // in int64, below min
  }
}
