// process_sampler.hpp — resident memory (VmRSS from /proc/PID/status) and open file
// descriptors (/proc/PID/fd) of another process, sampled at a fixed period while the sampler
// lives; the soak mode's evidence that memory stays flat and no descriptor leaks.
//
//   ProcessSampler s{pid};                       // a sample now, then one every second
//   ...
//   for (const ProcessSample& x : s.samples()) ...   // x.at, x.rss_bytes, x.fds
//
// A sample whose files cannot be read (the process is gone) is not recorded.
//
// Thread safety: `samples` and `take_sample` may be called from any thread.
#pragma once

#include <sandglass/deadline.hpp>

#include <cstddef>
#include <mutex>
#include <optional>
#include <stop_token>
#include <thread>
#include <vector>

namespace sandglass::bench {

struct ProcessSample {
  TimePoint at{};
  std::size_t rss_bytes = 0;
  std::size_t fds = 0;
};

// VmRSS of `pid` in bytes; nullopt when it cannot be read.
std::optional<std::size_t> vm_rss_bytes(int pid);
// Entries of /proc/PID/fd; nullopt when it cannot be read.
std::optional<std::size_t> open_fd_count(int pid);

class ProcessSampler {
 public:
  explicit ProcessSampler(int pid, Duration every = std::chrono::seconds{1});

  // A sample now (also recorded in the series); nullopt when the process cannot be read.
  std::optional<ProcessSample> take_sample();
  std::vector<ProcessSample> samples() const;

 private:
  int pid_;
  mutable std::mutex mu_;
  std::vector<ProcessSample> samples_;  // guarded by mu_
  std::jthread thread_;                 // last: stopped and joined first
};

}  // namespace sandglass::bench
