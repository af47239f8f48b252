// config_test_support.hpp — helpers for tests of the daemon's configuration: what a call threw,
// and a temporary file with given permissions that is removed at the end of its scope.
#pragma once

#include "daemon_process.hpp"

#include <sandglass/daemon/daemon_config.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <string>
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

}  // namespace sandglass::testing
