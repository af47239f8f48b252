// forwarding_daemon.hpp — sandglassd processes chained by the forward kind, for the tests of
// budgets across hops.
#pragma once

#include "daemon_test_support.hpp"

#include <doctest/doctest.h>

#include <boost/json/object.hpp>

#include <memory>
#include <string>
#include <vector>

namespace sandglass::testing {

// A daemon whose upstream "next" is the daemon on `port`, started through `launcher` if one is
// given (see DaemonProcess).
inline std::unique_ptr<DaemonProcess> forwarding_to(std::uint16_t port, const std::string& extra = {},
                                                    std::vector<std::string> args = {},
                                                    int reserve_ms = 20,
                                                    std::vector<std::string> launcher = {}) {
  const std::string config = write_temp_file(
      "forward.toml", "[upstreams.next]\nurl = \"http://127.0.0.1:" + std::to_string(port) +
                          "/v1/jobs\"\nreserve_ms = " + std::to_string(reserve_ms) + "\n" + extra);
  args.insert(args.begin(), {"--config", config});
  return std::make_unique<DaemonProcess>(std::move(args), std::move(launcher));
}

// A forward job's body: `inner` (a job request) sent to the upstream "next".
inline std::string forward_body(const std::string& inner) {
  return R"({"kind":"forward","args":{"upstream":"next","body":)" + inner + "}}";
}

// The downstream job's record inside a forward job's record (its result's body).
inline const boost::json::object& inner_record(const boost::json::object& record) {
  return record.at("result").as_object().at("body").as_object();
}

// Checks a chain of forward jobs' records from the top one down to the job at its end: the top
// one got `sent_ms`, each hop at most the budget of the one before less `reserve_ms` and still
// some, and the job at the end completed. Returns how many hops lie below the top.
inline int check_budget_shrinks_each_hop(const boost::json::object& top, std::int64_t sent_ms,
                                         std::int64_t reserve_ms) {
  CHECK(timing(top, "budget_ms") == sent_ms);
  const boost::json::object* hop = &top;
  int hops = 0;
  while (hop->at("kind").as_string() == "forward") {
    const boost::json::object& next = inner_record(*hop);
    CHECK(timing(next, "budget_ms") <= timing(*hop, "budget_ms") - reserve_ms);
    CHECK(timing(next, "budget_ms") > 0);
    hop = &next;
    ++hops;
  }
  CHECK(hop->at("state").as_string() == "completed");
  return hops;
}

}  // namespace sandglass::testing
