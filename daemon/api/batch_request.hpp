// batch_request.hpp (private) — `POST /v1/jobs/batch`: many jobs in one request, each admitted
// on its own, none waited for.
//
//   body:    {"jobs": [JOB, ...]}   each JOB as the body of POST /v1/jobs (job_request.hpp),
//            1 to server.max_batch of them
//   headers: x-request-timeout-ms, grpc-timeout (each job's budget is at most what they name)
//   answer:  200 {"jobs": [ITEM, ...]}, one ITEM per job in the request's order: what
//            POST /v1/jobs?wait=false would have answered for that job, as its body's fields
//            plus "status", that answer's HTTP status (202 queued, 503 rejected queue_full, ...)
//
// A malformed batch is refused whole, before any job is submitted: 400 naming the field by its
// place ("jobs[3].args.ms"). No query parameter is accepted (a batch never waits for outcomes),
// nor the idempotency-key header (each job names its own key).
//
// Thread safety: pure functions.
#pragma once

#include "daemon/api/job_request.hpp"
#include "daemon/http/http_message.hpp"

#include <chrono>
#include <cstddef>
#include <string>
#include <variant>
#include <vector>

namespace sandglass::daemon {

inline constexpr std::string_view kBatchPath = "/v1/jobs/batch";

std::variant<std::vector<JobRequest>, RequestError> parse_batch_request(const HttpRequest& request,
                                                                        std::size_t max_json_depth,
                                                                        std::size_t max_batch,
                                                                        std::chrono::milliseconds max_delay);

// "jobs[3]." + field: the place of an error found in the batch's job number `index`.
RequestError in_batch_item(std::size_t index, RequestError error);

// The batch's answer from each job's own answer, in order.
HttpResponse batch_response(const std::vector<HttpResponse>& answers);

}  // namespace sandglass::daemon
