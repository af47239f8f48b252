#include "process_sampler.hpp"

#include <charconv>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <string>

namespace sandglass::bench {

std::optional<std::size_t> vm_rss_bytes(int pid) {
  std::ifstream status{"/proc/" + std::to_string(pid) + "/status"};
  // "VmRSS:\t   12345 kB"
  for (std::string line; std::getline(status, line);) {
    if (!line.starts_with("VmRSS:")) continue;
    const auto digits = line.find_first_of("0123456789");
    if (digits == std::string::npos) return std::nullopt;
    std::size_t kib = 0;
    std::from_chars(line.data() + digits, line.data() + line.size(), kib);
    return kib * 1024;
  }
  return std::nullopt;
}

std::optional<std::size_t> open_fd_count(int pid) {
  std::error_code ec;
  std::filesystem::directory_iterator it{"/proc/" + std::to_string(pid) + "/fd", ec};
  if (ec) return std::nullopt;
  std::size_t n = 0;
  for (; it != std::filesystem::directory_iterator{}; it.increment(ec)) {
    if (ec) return std::nullopt;
    ++n;
  }
  return n;
}

ProcessSampler::ProcessSampler(int pid, Duration every)
    : pid_{pid}, thread_{[this, every](std::stop_token stop) {
        std::mutex wait_mu;
        std::condition_variable_any wake;
        std::unique_lock lock{wait_mu};
        TimePoint next = Clock::now();
        for (;;) {
          take_sample();
          next += every;
          // Returns at once when the destructor requests a stop.
          wake.wait_until(lock, stop, next, [] { return false; });
          if (stop.stop_requested()) return;
        }
      }} {}

std::optional<ProcessSample> ProcessSampler::take_sample() {
  const TimePoint at = Clock::now();
  const auto rss = vm_rss_bytes(pid_);
  const auto fds = open_fd_count(pid_);
  if (!rss || !fds) return std::nullopt;
  const ProcessSample s{.at = at, .rss_bytes = *rss, .fds = *fds};
  std::lock_guard lock{mu_};
  samples_.push_back(s);
  return s;
}

std::vector<ProcessSample> ProcessSampler::samples() const {
  std::lock_guard lock{mu_};
  return samples_;
}

}  // namespace sandglass::bench
