// wake_fd.hpp (private) — `WakeFd`, an eventfd that wakes a thread out of poll(): the cluster
// listener waits on its database socket and on this.
//
// Thread safety: `wake` from any thread; `clear` and `fd` from the waiting thread.
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <system_error>

namespace sandglass::daemon::cluster {

class WakeFd {
 public:
  WakeFd() : fd_{::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)} {  // throws std::system_error
    if (fd_ < 0) throw std::system_error{errno, std::generic_category(), "eventfd"};
  }
  ~WakeFd() { ::close(fd_); }
  WakeFd(const WakeFd&) = delete;
  WakeFd& operator=(const WakeFd&) = delete;
  int fd() const noexcept { return fd_; }
  void wake() noexcept {
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto n = ::write(fd_, &one, sizeof one);
  }
  void clear() noexcept {
    std::uint64_t value = 0;
    [[maybe_unused]] const auto n = ::read(fd_, &value, sizeof value);
  }

 private:
  int fd_;
};

}  // namespace sandglass::daemon::cluster
