#include "daemon/kinds/configured_estimate_key.hpp"

#include <doctest/doctest.h>

#include <boost/json/parse.hpp>

#include <functional>
#include <map>
#include <string>

using sandglass::daemon::configured_estimate_key;

namespace {

const std::map<std::string, int, std::less<>> kConfigured{{"slow", 1}, {"fast", 2}};

std::string key_of(const char* args_json) {
  return configured_estimate_key(boost::json::parse(args_json).as_object(), "command", kConfigured, "exec");
}

}  // namespace

TEST_SUITE("configured_estimate_key") {
  TEST_CASE("a job naming a configured entry gets that entry's key, any other the kind's own") {
    CHECK(key_of(R"({"command":"slow"})") == "exec:slow");
    CHECK(key_of(R"({"command":"fast","stdin":"x"})") == "exec:fast");
    CHECK(key_of(R"({"command":"other"})").empty());  // unknown: no key of its own, bounded
    CHECK(key_of(R"({"command":7})").empty());
    CHECK(key_of(R"({})").empty());
  }
}
