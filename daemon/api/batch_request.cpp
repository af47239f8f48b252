#include "daemon/api/batch_request.hpp"

#include "daemon/http/http_status.hpp"

#include <boost/json/array.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <cstdint>
#include <string>
#include <utility>

namespace sandglass::daemon {

RequestError in_batch_item(std::size_t index, RequestError error) {
  error.field = "jobs[" + std::to_string(index) + "]." + error.field;
  return error;
}

std::variant<std::vector<JobRequest>, RequestError> parse_batch_request(const HttpRequest& request,
                                                                        std::size_t max_json_depth,
                                                                        std::size_t max_batch,
                                                                        std::chrono::milliseconds max_delay) {
  if (const std::string_view query = split_target(request.target).query; !query.empty()) {
    return RequestError{"query", "a batch takes no query parameters: it never waits for outcomes"};
  }
  if (request.header(kIdempotencyKeyHeader)) {
    return RequestError{std::string{kIdempotencyKeyHeader},
                        "is not accepted on a batch; give each job its own idempotency_key"};
  }
  JobRequest headers_only;
  if (auto e = read_wire_budgets(request, headers_only)) return *e;

  auto parsed = parse_json_body(request.body, max_json_depth, /*index_elements=*/true);
  if (auto* e = std::get_if<RequestError>(&parsed)) return std::move(*e);
  const boost::json::value& body = std::get<boost::json::value>(parsed);
  if (!body.is_object()) return RequestError{"body", R"(must be a JSON object {"jobs": [...]})"};
  for (const auto& [key, value] : body.get_object()) {
    if (key != "jobs") return RequestError{std::string{key}, "is not a known field of a batch"};
  }
  const boost::json::value* jobs = body.get_object().if_contains("jobs");
  if (jobs == nullptr) return RequestError{"jobs", "is required"};
  if (!jobs->is_array() || jobs->get_array().empty() || jobs->get_array().size() > max_batch) {
    return RequestError{"jobs", "must be an array of 1 to " + std::to_string(max_batch) +
                                    " jobs (server.max_batch)"};
  }
  std::vector<JobRequest> out;
  out.reserve(jobs->get_array().size());
  for (const boost::json::value& job : jobs->get_array()) {
    const std::size_t index = out.size();
    if (!job.is_object()) return in_batch_item(index, {"body", "must be a JSON object"});
    JobRequest req;
    req.budget = headers_only.budget;
    req.wait = false;
    if (auto e = read_job_fields(job.get_object(), req, max_delay)) return in_batch_item(index, std::move(*e));
    out.push_back(std::move(req));
  }
  return out;
}

HttpResponse batch_response(const std::vector<HttpResponse>& answers) {
  boost::json::array items;
  items.reserve(answers.size());
  for (const HttpResponse& answer : answers) {
    boost::system::error_code ec;
    boost::json::value body = boost::json::parse(answer.body, ec);
    boost::json::object item = !ec && body.is_object() ? std::move(body.get_object()) : boost::json::object{};
    item["status"] = static_cast<std::int64_t>(answer.status);
    items.push_back(std::move(item));
  }
  return {.body = boost::json::serialize(boost::json::object{{"jobs", std::move(items)}})};
}

}  // namespace sandglass::daemon
