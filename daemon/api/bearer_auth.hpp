// bearer_auth.hpp (private) — `BearerAuth`, the optional bearer token that sandglassd requires on
// every path but /healthz, /readyz and /metrics (config key server.auth_token_file),
// `constant_time_equals`, the comparison it uses, and `read_auth_token_file`, which reads it.
//
//   BearerAuth auth{"s3cret"};
//   auth.check(request);   // allowed only for exactly one "Authorization: Bearer s3cret"
//
// The token is compared in constant time: the work done depends neither on where the first
// difference is nor on the token's length (see constant_time_equals). Nothing here logs.
//
// Thread safety: `BearerAuth` is immutable after construction; `check` may be called from any
// number of threads.
#pragma once

#include "daemon/http/http_message.hpp"

#include <cstddef>
#include <string>
#include <string_view>

namespace sandglass::daemon {

// The longest token sandglassd accepts (in the token file and in a request).
inline constexpr std::size_t kMaxAuthTokenBytes = 4096;

// True if `given` equals `expected`. Both must be at most kMaxAuthTokenBytes long (a longer
// `given` is simply unequal, found without looking at `expected`). Always reads
// kMaxAuthTokenBytes positions of both, so its time tells neither where they differ nor how
// long `expected` is.
bool constant_time_equals(std::string_view expected, std::string_view given) noexcept;

class BearerAuth {
 public:
  // `token` empty: no token is required.
  explicit BearerAuth(std::string token) : token_{std::move(token)} {}

  enum class Verdict {
    allowed,  // no token is required, or the request carries the right one
    missing,  // no Authorization header, or not one in the Bearer scheme
    invalid,  // a Bearer token that is not the right one, or more than one Authorization header
  };

  bool required() const noexcept { return !token_.empty(); }
  // Allowed when no token is required, or when `request` has exactly one Authorization header,
  // "Bearer TOKEN" (the scheme in any case, then one or more spaces) with the right token.
  Verdict check(const HttpRequest& request) const noexcept;

 private:
  std::string token_;
};

// What is wrong with a token, or "" when nothing is: it must be 1 to kMaxAuthTokenBytes visible
// ASCII characters (no spaces or control characters). Never quotes the token.
std::string auth_token_problem(std::string_view token);

// The token in the file at `path`, without its trailing newline(s). Throws ConfigError naming
// server.auth_token_file when the file cannot be read, is not a regular file, may be read or
// written by group or others (mode & 077), or holds no valid token. Errors name the file, never
// its content.
std::string read_auth_token_file(const std::string& path);

// Paths that stay open when a token is required: health, readiness and metrics, and the status
// page's static files (which hold no data; see daemon/ui/status_page.hpp).
bool is_open_path(std::string_view path) noexcept;

}  // namespace sandglass::daemon
