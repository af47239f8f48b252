// metrics.hpp (private) — `DaemonMetrics`, the daemon's Prometheus metrics (prefix `sandglass_`),
// rendered in the text exposition format with prometheus-cpp's serializer.
//
// Labels come only from bounded sets: kind (the registry's kinds), priority, state, reason,
// cause, and the HTTP status code. Never a deadline, an id or a key.
//
// Thread safety: all member functions may be called concurrently.
#pragma once

#include <sandglass/job_spec.hpp>
#include <sandglass/outcome.hpp>
#include <sandglass/runtime.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace sandglass::daemon {

class DaemonMetrics {
 public:
  DaemonMetrics();
  ~DaemonMetrics();
  DaemonMetrics(const DaemonMetrics&) = delete;
  DaemonMetrics& operator=(const DaemonMetrics&) = delete;

  // A request for a job of `kind` reached admission.
  void job_submitted(std::string_view kind, Priority priority);
  // A job's terminal outcome (exactly once per submitted job).
  void job_finished(const Outcome& outcome, Priority priority);
  // An HTTP response was sent with `status`.
  void http_response(unsigned status);

  // The text exposition format. Gauges are set from `stats` first.
  std::string render(const RuntimeStats& stats, std::size_t workers, bool draining);

 private:
  struct Families;
  std::unique_ptr<Families> families_;
};

}  // namespace sandglass::daemon
