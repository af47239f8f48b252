// config_test_support.hpp — helpers for tests of the daemon's configuration: what a call threw
// (parsing a config, validating it), and temporary files with given permissions (a token file)
// that are removed at the end of their scope.
#pragma once

#include "daemon_process.hpp"

#include <sandglass/daemon/daemon_config.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

namespace sandglass::testing {

// What a call threw: the ConfigError's key and what(), or key "" and "no error".
struct Thrown {
  std::string key;
  std::string what;
};

template <typename Call>
Thrown thrown_by(Call call) {
  try {
    call();
  } catch (const sandglass::daemon::ConfigError& e) {
    return {e.key(), e.what()};
  }
  return {"", "no error"};
}

// What parsing `toml` threw.
inline Thrown parse_error(std::string_view toml) {
  return thrown_by([toml] { (void)sandglass::daemon::parse_config(toml); });
}

// What validating `config` threw.
inline Thrown validate_error(const sandglass::daemon::DaemonConfig& config) {
  return thrown_by([&config] { config.validate(); });
}

// What parsing `toml` and validating the result threw.
inline Thrown config_error(std::string_view toml) {
  return thrown_by([toml] { sandglass::daemon::parse_config(toml).validate(); });
}

// A temporary file holding `text` with permissions `mode`, removed at the end of the scope.
class ScopedTempFile {
 public:
  ScopedTempFile(const std::string& name, const std::string& text, ::mode_t mode = 0600)
      : path_{write_temp_file(name, text)} {
    ::chmod(path_.c_str(), mode);
  }
  ScopedTempFile(const ScopedTempFile&) = delete;
  ScopedTempFile& operator=(const ScopedTempFile&) = delete;
  ~ScopedTempFile() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A bearer token file (server.auth_token_file) holding `text`.
struct TokenFile : ScopedTempFile {
  explicit TokenFile(const std::string& text, ::mode_t mode = 0600)
      : ScopedTempFile{"token", text, mode} {}
};

}  // namespace sandglass::testing
