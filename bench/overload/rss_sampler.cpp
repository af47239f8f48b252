#include "rss_sampler.hpp"

#include <unistd.h>

#include <condition_variable>
#include <fstream>
#include <mutex>

namespace sandglass::bench {

std::size_t resident_bytes(const std::string& pid) {
  std::ifstream statm{"/proc/" + pid + "/statm"};
  std::size_t total_pages = 0;
  std::size_t resident_pages = 0;
  if (!(statm >> total_pages >> resident_pages)) return 0;
  return resident_pages * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

RssSampler::RssSampler(std::string pid, Duration every)
    : peak_{resident_bytes(pid)},
      thread_{[this, pid = std::move(pid), every](std::stop_token stop) {
        std::mutex mu;
        std::condition_variable_any wake;
        std::unique_lock lock{mu};
        for (;;) {
          // Returns at once when the destructor requests a stop.
          wake.wait_for(lock, stop, every, [] { return false; });
          if (stop.stop_requested()) return;
          const std::size_t now = resident_bytes(pid);
          if (now > peak_.load(std::memory_order_relaxed)) {
            peak_.store(now, std::memory_order_relaxed);
          }
        }
      }} {}

}  // namespace sandglass::bench
