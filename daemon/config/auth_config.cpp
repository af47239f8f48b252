// server.auth_token_file: the bearer token, read from its file when the key is read
// (bearer_auth.cpp reads and checks the file).
#include "daemon/config/config_reader.hpp"

#include "daemon/api/bearer_auth.hpp"

namespace sandglass::daemon::config {
namespace {

constexpr std::string_view kAuthTokenKey = "server.auth_token_file";

}  // namespace

// An empty path means no token (so a flag can turn off what the file set).
void set_auth_token_file(DaemonConfig& c, const Entry& e) {
  c.auth_token_file = e.string("a path to a file holding the token");
  c.auth_token = c.auth_token_file.empty() ? std::string{} : read_auth_token_file(c.auth_token_file);
}

void validate_auth(const DaemonConfig& c) {
  if (!c.auth_token.empty()) {
    if (const std::string problem = auth_token_problem(c.auth_token); !problem.empty()) {
      throw ConfigError{std::string{kAuthTokenKey}, "the token " + problem};
    }
  } else if (!c.auth_token_file.empty()) {
    throw ConfigError{std::string{kAuthTokenKey},
                      "names a file, but no token was read from it (set the key through the "
                      "config file or apply_setting, which read the file)"};
  }
}

}  // namespace sandglass::daemon::config
