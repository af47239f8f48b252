// daemon_test_support.hpp — small helpers shared by the sandglassd integration tests.
#pragma once

#include "daemon_process.hpp"
#include "http_client.hpp"

#include <doctest/doctest.h>

#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

namespace sandglass::testing {

inline boost::json::object json_of(const HttpAnswer& a) {
  return boost::json::parse(a.body).as_object();
}

// The id of the job an answer to POST /v1/jobs describes.
inline std::uint64_t id_of(const HttpAnswer& a) { return json_of(a).at("id").to_number<std::uint64_t>(); }

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

// True for the states a job ends in (completed, failed, rejected, expired, cancelled).
inline bool terminal(std::string_view state) {
  return !state.empty() && state != "scheduled" && state != "queued" && state != "claimed" &&
         state != "running";
}

// Cancels job `id` with DELETE and returns its record once the job has ended. The DELETE answers
// 200 with the ended record when the job ended within the daemon's short wait, or 202
// "cancelling" when it has not yet. Which of the two a running job gets is timing (a loaded
// machine is slow to reach the next checkpoint), so both are accepted, each is checked for what
// it must say, and the record is then read until it is terminal.
inline boost::json::object cancel_job(std::uint16_t port, std::uint64_t id) {
  const std::string path = "/v1/jobs/" + std::to_string(id);
  const HttpAnswer del = http(port, "DELETE", path);
  REQUIRE((del.status == 200 || del.status == 202));
  const boost::json::object answer = json_of(del);
  if (del.status == 200) {
    CHECK(terminal(answer.at("state").as_string()));
    return answer;
  }
  CHECK(answer.at("state").as_string() == "cancelling");
  CHECK(answer.at("id").to_number<std::uint64_t>() == id);
  REQUIRE(eventually([&] { return terminal(state_of(port, id)); }));
  return json_of(http(port, "GET", path));
}

// Checks the answer its waiting client gets for a job that a DELETE reached past its commit
// point: 200, completed after cancel with cause caller, committed. Returns the record.
inline boost::json::object completed_after_caller_cancel(const std::optional<HttpAnswer>& a) {
  REQUIRE(a.has_value());
  CHECK(a->status == 200);
  boost::json::object r = json_of(*a);
  CHECK(r.at("state").as_string() == "completed");
  CHECK(r.at("reason").as_string() == "completed_after_cancel");
  CHECK(r.at("cause").as_string() == "caller");
  CHECK(r.at("result").as_object().at("committed").as_bool());
  return r;
}

// The value of one sample line of /metrics (exact series text up to the value), or -1.
inline double metric(std::uint16_t port, const std::string& series) {
  const HttpAnswer a = http(port, "GET", "/metrics");
  const auto at = a.body.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(a.body.substr(at + series.size() + 2));
}

}  // namespace sandglass::testing
