// kind_registry.hpp — `KindRegistry`, the job kinds a daemon serves, and `JobKind`, how one kind
// turns a request's `args` into a handler.
//
//   sandglass::daemon::KindRegistry kinds = sandglass::daemon::builtin_kinds(config);
//   kinds.add("resize", {.prepare = [](const boost::json::object& args) {
//     int width = sandglass::daemon::require_int(args, "width", 1, 10'000);
//     return sandglass::JobHandler{[width](sandglass::JobContext& ctx) { ... }};
//   }});
//
// A kind validates `args` when the request arrives, before admission, and throws `ArgsError`
// naming the field; the daemon answers 400 with that field. The handler it returns runs on a
// worker; what it passes to `JobContext::set_result` must be JSON text (the daemon embeds it in
// the job record as JSON).
//
// Thread safety: build the registry before the daemon starts; afterwards it is only read.
#pragma once

#include <sandglass/job_context.hpp>

#include <boost/json/object.hpp>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace sandglass::daemon {

struct DaemonConfig;

// Invalid job arguments; `field()` is the path in the request body, e.g. "args.ms".
class ArgsError : public std::invalid_argument {
 public:
  ArgsError(std::string field, const std::string& message)
      : std::invalid_argument{message}, field_{std::move(field)} {}
  const std::string& field() const noexcept { return field_; }

 private:
  std::string field_;
};

struct JobKind {
  // Validates `args` (an empty object when the request had none) and returns the handler.
  // Throws ArgsError. Called on an I/O thread: it must be quick and must not block.
  std::function<JobHandler(const boost::json::object& args)> prepare;
  // Optional: the kind's own series in the Prometheus text format, appended to GET /metrics
  // (e.g. the forward kind's per-upstream attempts and breaker states). Any thread.
  std::function<std::string()> metrics;
  // Optional: the estimate key of a job with these (valid) `args`, e.g. "exec:<command>", so
  // that each variant of the kind has its own run-time estimate (JobSpec::estimate_key).
  // Empty, or no function: the kind. Keys must come from the config, never from the request's
  // free text, so that their number stays bounded. Called on an I/O thread after `prepare`.
  std::function<std::string(const boost::json::object& args)> estimate_key;
  // Optional: the run time a job with these (valid) `args` says it takes of itself, used as
  // its JobSpec::expected when the request names no `expected_ms`. Zero, or no function: none.
  // Called on an I/O thread after `prepare`.
  std::function<Duration(const boost::json::object& args)> expected;
};

class KindRegistry {
 public:
  // Throws std::invalid_argument for an empty name, a name used before, or no `prepare`.
  void add(std::string name, JobKind kind);
  const JobKind* find(std::string_view name) const noexcept;
  std::vector<std::string> names() const;

 private:
  std::map<std::string, JobKind, std::less<>> kinds_;
};

// `sleep`, `spin`, `exec` (the config's commands), `forward` (its upstreams) and `sql` (its
// databases and queries; opens one connection per database at once, see builtin_kinds.hpp).
KindRegistry builtin_kinds(const DaemonConfig& config);

// Helpers for `prepare`: read `args[key]` as an integer in [min, max]; throw ArgsError with
// field "args.<key>" when missing, of another type or out of range.
std::int64_t require_int(const boost::json::object& args, std::string_view key, std::int64_t min,
                         std::int64_t max);
// As above, but a missing key yields `fallback`.
std::int64_t optional_int(const boost::json::object& args, std::string_view key,
                          std::int64_t fallback, std::int64_t min, std::int64_t max);
std::string require_string(const boost::json::object& args, std::string_view key);
// Throws ArgsError naming the first key of `args` that is not in `known`.
void reject_unknown_keys(const boost::json::object& args,
                         std::initializer_list<std::string_view> known);

}  // namespace sandglass::daemon
