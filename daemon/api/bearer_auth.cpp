#include "daemon/api/bearer_auth.hpp"

#include "daemon/ui/status_page.hpp"

#include <sandglass/daemon/daemon_config.hpp>

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <system_error>

namespace sandglass::daemon {
namespace {

constexpr std::string_view kScheme = "bearer";

bool starts_with_scheme(std::string_view value) noexcept {
  if (value.size() <= kScheme.size()) return false;
  for (std::size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(value[i])) != kScheme[i]) return false;
  }
  return value[kScheme.size()] == ' ';
}

[[noreturn]] void token_file_error(const std::string& message) {
  throw ConfigError{"server.auth_token_file", message};
}

}  // namespace

bool constant_time_equals(std::string_view expected, std::string_view given) noexcept {
  if (given.size() > kMaxAuthTokenBytes || expected.size() > kMaxAuthTokenBytes) return false;
  // Reads through volatile pointers, so the compiler can neither stop at the first difference
  // nor skip positions; every position past a string's end reads as 0 and counts through the
  // length difference below.
  const volatile unsigned char* e = reinterpret_cast<const unsigned char*>(expected.data());
  const volatile unsigned char* g = reinterpret_cast<const unsigned char*>(given.data());
  unsigned difference = static_cast<unsigned>(expected.size() ^ given.size());
  for (std::size_t i = 0; i < kMaxAuthTokenBytes; ++i) {
    const unsigned char a = i < expected.size() ? e[i] : 0;
    const unsigned char b = i < given.size() ? g[i] : 0;
    difference |= static_cast<unsigned>(a ^ b);
  }
  return difference == 0;
}

BearerAuth::Verdict BearerAuth::check(const HttpRequest& request) const noexcept {
  if (!required()) return Verdict::allowed;
  const auto is_authorization = [](const auto& header) { return header.first == "authorization"; };
  const auto count = std::ranges::count_if(request.headers, is_authorization);
  if (count == 0) return Verdict::missing;
  if (count > 1) return Verdict::invalid;
  std::string_view value = std::ranges::find_if(request.headers, is_authorization)->second;
  if (!starts_with_scheme(value)) return Verdict::missing;
  value.remove_prefix(kScheme.size());
  while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  return constant_time_equals(token_, value) ? Verdict::allowed : Verdict::invalid;
}

std::string auth_token_problem(std::string_view token) {
  if (token.empty()) return "is empty";
  if (token.size() > kMaxAuthTokenBytes) {
    return fmt::format("holds more than {} bytes", kMaxAuthTokenBytes);
  }
  const auto visible = [](char c) { return c > 0x20 && c < 0x7F; };
  if (!std::ranges::all_of(token, visible)) {
    return "must be one line of visible ASCII characters (no spaces or control characters)";
  }
  return {};
}

std::string read_auth_token_file(const std::string& path) {
  const std::string quoted = fmt::format("{:?}", path);
  // O_NONBLOCK: a FIFO in its place must not hang the start.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    token_file_error(fmt::format("cannot read {}: {}", quoted, std::generic_category().message(errno)));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat info{};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    token_file_error(fmt::format("{} is not a regular file", quoted));
  }
  if ((info.st_mode & 077) != 0) {
    token_file_error(fmt::format(
        "{} may be read or written by group or others (mode {:04o}); make it 0600 or 0400", quoted,
        info.st_mode & 07777));
  }
  // The longest token, a CR LF, and one byte more to tell that there is more.
  std::string text(kMaxAuthTokenBytes + 3, '\0');
  std::size_t size = 0;
  while (size < text.size()) {
    const ssize_t n = ::read(fd, text.data() + size, text.size() - size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      token_file_error(fmt::format("cannot read {}: {}", quoted, std::generic_category().message(errno)));
    }
    if (n == 0) break;
    size += static_cast<std::size_t>(n);
  }
  text.resize(size);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  if (const std::string problem = auth_token_problem(text); !problem.empty()) {
    token_file_error(quoted + " " + problem);
  }
  return text;
}

bool is_open_path(std::string_view path) noexcept {
  static constexpr std::array<std::string_view, 3> kOpen{"/healthz", "/readyz", "/metrics"};
  return std::ranges::find(kOpen, path) != kOpen.end() || is_status_page_path(path);
}

}  // namespace sandglass::daemon
