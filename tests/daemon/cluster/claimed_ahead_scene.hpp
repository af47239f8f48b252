// claimed_ahead_scene.hpp — three long jobs for a node with one worker and one place ahead
// ([cluster] claim_ahead = 1): one runs, one is claimed ahead (held unstarted in the node's
// local queue), one stays in the database's queue.
//
//   DaemonProcess& runner = c.node({"sleep"}, 1, {}, "claim_ahead = 1");
//   const auto [running, ahead, queued] = three_long_sleeps(entry.port());
#pragma once

#include "daemon_test_support.hpp"

#include <doctest/doctest.h>

#include <array>
#include <cstdint>

namespace sandglass::testing {

// Submits three 60 s sleep jobs (critical, high, normal) in one batch on `port`, so that the
// runner's claims find all three at once: its worker takes the first; that claim got all it
// asked for (the queue has a backlog), so a claim ahead takes the second; the third waits. The
// claim order (class, then deadline) decides which is which. Each says it is short
// (expected_ms), so that admission does not count the ones ahead of it as 60 s each. Their ids,
// in that order.
inline std::array<std::uint64_t, 3> three_long_sleeps(std::uint16_t port) {
  const HttpAnswer r = http(port, "POST", "/v1/jobs/batch", R"({"jobs":[
      {"kind":"sleep","expected_ms":1,"args":{"ms":60000},"priority":"critical","timeout_ms":90000},
      {"kind":"sleep","expected_ms":1,"args":{"ms":60000},"priority":"high","timeout_ms":95000},
      {"kind":"sleep","expected_ms":1,"args":{"ms":60000},"priority":"normal","timeout_ms":99000}]})");
  REQUIRE(r.status == 200);
  const boost::json::object answer = json_of(r);
  const auto& jobs = answer.at("jobs").as_array();
  REQUIRE(jobs.size() == 3);
  std::array<std::uint64_t, 3> ids{};
  for (std::size_t i = 0; i < 3; ++i) {
    REQUIRE(jobs[i].at("status").to_number<int>() == 202);
    ids[i] = jobs[i].at("id").to_number<std::uint64_t>();
  }
  return ids;
}

}  // namespace sandglass::testing
