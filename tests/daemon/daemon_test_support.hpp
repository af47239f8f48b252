// daemon_test_support.hpp — small helpers shared by the sandglassd integration tests.
#pragma once

#include "daemon_process.hpp"
#include "http_client.hpp"

#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

namespace sandglass::testing {

inline boost::json::object json_of(const HttpAnswer& a) {
  return boost::json::parse(a.body).as_object();
}

inline HttpAnswer post_job(std::uint16_t port, const std::string& body,
                           const std::vector<std::pair<std::string, std::string>>& headers = {},
                           const std::string& query = {}) {
  return http(port, "POST", "/v1/jobs" + query, body, headers);
}

inline std::int64_t timing(const boost::json::object& record, const char* name) {
  return record.at("timings").as_object().at(name).as_int64();
}

// Polls `condition` until it holds or `timeout` passes (observing the daemon from outside: a
// wait for a state, not a sleep that orders events).
inline bool eventually(const std::function<bool()>& condition,
                       std::chrono::milliseconds timeout = std::chrono::seconds{20}) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds{5});
  }
  return condition();
}

// The job's state as GET /v1/jobs/{id} reports it; "" when 404.
inline std::string state_of(std::uint16_t port, std::uint64_t id) {
  const HttpAnswer a = http(port, "GET", "/v1/jobs/" + std::to_string(id));
  if (a.status != 200) return {};
  return std::string{json_of(a).at("state").as_string()};
}

// The value of one sample line of /metrics (exact series text up to the value), or -1.
inline double metric(std::uint16_t port, const std::string& series) {
  const HttpAnswer a = http(port, "GET", "/metrics");
  const auto at = a.body.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(a.body.substr(at + series.size() + 2));
}

}  // namespace sandglass::testing
