// Fuzzes the validation of a job request (POST /v1/jobs): parse_job_request, then the `prepare`
// of the kind it names from the builtin registry, which validates `args`. Handlers are only
// made, never run: no process starts, no socket opens.
//
// Input: a small text form of the request.
//   line 1            the target, e.g. "/v1/jobs?wait=false"
//   "name: value"     header lines (names lower-cased, as the server does) up to an empty line
//   the rest          the body
//
// Checks: a valid request has a kind and a key of at most 256 bytes and a non-negative budget;
// an error names a field and has a message; a kind's ArgsError names a field under "args".
#include "fuzz_check.hpp"

#include "daemon/http/http_message.hpp"
#include "daemon/api/job_request.hpp"

#include <sandglass/daemon/daemon_config.hpp>
#include <sandglass/daemon/kind_registry.hpp>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

namespace {

using namespace sandglass::daemon;

// The default config's commands and upstream, so that exec and forward validate real names.
DaemonConfig fuzz_config() {
  DaemonConfig config;
  config.commands["echo"] = CommandConfig{.argv = {"/bin/echo", "hello"}, .allow_stdin = false};
  config.commands["cat"] = CommandConfig{.argv = {"/bin/cat"}};
  config.upstreams["next"] = UpstreamConfig{.url = "http://127.0.0.1:9/v1/jobs",
                                            .host = "127.0.0.1", .port = 9, .target = "/v1/jobs"};
  return config;
}

std::string_view next_line(std::string_view& rest) {
  const std::size_t end = rest.find('\n');
  std::string_view line = rest.substr(0, end);
  rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
  if (line.ends_with('\r')) line.remove_suffix(1);
  return line;
}

HttpRequest request_of(std::string_view input) {
  HttpRequest request{.method = "POST"};
  request.target = std::string{next_line(input)};
  while (!input.empty()) {
    const std::string_view line = next_line(input);
    if (line.empty()) break;
    const std::size_t colon = line.find(':');
    std::string name{line.substr(0, colon)};
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    std::string_view value = colon == std::string_view::npos ? "" : line.substr(colon + 1);
    while (value.starts_with(' ')) value.remove_prefix(1);
    request.headers.emplace_back(std::move(name), std::string{value});
  }
  request.body = std::string{input};
  return request;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const DaemonConfig config = fuzz_config();
  static const KindRegistry kinds = builtin_kinds(config);

  const HttpRequest request = request_of({reinterpret_cast<const char*>(data), size});
  auto parsed = parse_job_request(request, config.limits.max_json_depth);
  if (const auto* error = std::get_if<RequestError>(&parsed)) {
    FUZZ_CHECK(!error->field.empty());
    FUZZ_CHECK(!error->message.empty());
    return 0;
  }
  const JobRequest& job = std::get<JobRequest>(parsed);
  FUZZ_CHECK(!job.kind.empty());
  FUZZ_CHECK(job.idempotency_key.size() <= kMaxIdempotencyKeyBytes);
  FUZZ_CHECK(!job.budget || *job.budget >= sandglass::Duration::zero());

  const JobKind* kind = kinds.find(job.kind);
  if (kind == nullptr) return 0;
  try {
    const sandglass::JobHandler handler = kind->prepare(job.args);
    FUZZ_CHECK(static_cast<bool>(handler));
  } catch (const ArgsError& e) {
    FUZZ_CHECK(e.field().starts_with("args"));
    FUZZ_CHECK(std::string_view{e.what()}.size() > 0);
  }
  return 0;
}
