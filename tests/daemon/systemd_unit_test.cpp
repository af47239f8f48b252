// deploy/systemd/sandglassd.service: systemd accepts it, and its stop timeout covers the drain
// that the shipped config allows.
#include <sandglass/daemon/daemon_config.hpp>

#include "daemon_process.hpp"
#include "test_paths.hpp"

#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

using namespace std::chrono_literals;

namespace {

const std::string kUnitPath = sandglass::testing::source_path("deploy/systemd/sandglassd.service");
const std::string kShippedConfig = sandglass::testing::source_path("daemon/config/sandglassd.toml");
constexpr std::string_view kInstalledBinary = "/usr/local/bin/sandglassd";

std::string unit_text() {
  std::ifstream in{kUnitPath};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The value of `key=` in the unit ("" if absent); the last one wins, as in systemd.
std::string setting(const std::string& text, const std::string& key) {
  std::istringstream in{text};
  std::string line;
  std::string value;
  while (std::getline(in, line)) {
    if (line.starts_with(key + "=")) value = line.substr(key.size() + 1);
  }
  return value;
}

struct Output {
  int exit_code = -1;
  std::string text;  // stdout and stderr
};

Output run_shell(const std::string& command) {
  Output out;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buf[4096];
  while (const std::size_t n = std::fread(buf, 1, sizeof buf, pipe)) out.text.append(buf, n);
  const int status = ::pclose(pipe);
  out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

}  // namespace

TEST_SUITE("systemd unit") {
  TEST_CASE("the unit runs sandglassd sandboxed as a dynamic user with the token as a credential") {
    const std::string text = unit_text();
    REQUIRE(!text.empty());
    CHECK(setting(text, "ExecStart") ==
          std::string{kInstalledBinary} +
              " --config /etc/sandglass/sandglassd.toml --auth-token-file %d/auth-token");
    CHECK(setting(text, "LoadCredential") == "auth-token:/etc/sandglass/auth-token");
    CHECK(setting(text, "DynamicUser") == "yes");
    CHECK(setting(text, "NoNewPrivileges") == "yes");
    CHECK(setting(text, "CapabilityBoundingSet").empty());
    CHECK(setting(text, "ProtectSystem") == "strict");
    CHECK(setting(text, "ProtectHome") == "yes");
    CHECK(setting(text, "PrivateTmp") == "yes");
    CHECK(setting(text, "PrivateDevices") == "yes");
    CHECK(setting(text, "RestrictAddressFamilies") == "AF_INET AF_INET6 AF_UNIX");
    CHECK(setting(text, "SystemCallFilter") == "@system-service");
    CHECK(setting(text, "MemoryDenyWriteExecute") == "yes");
    CHECK(setting(text, "LockPersonality") == "yes");
    CHECK(setting(text, "Restart") == "on-failure");
    CHECK(setting(text, "KillMode") == "mixed");
  }

  TEST_CASE("the stop timeout covers the drain the shipped config allows") {
    const std::string timeout = setting(unit_text(), "TimeoutStopSec");
    REQUIRE(timeout.ends_with("s"));
    const std::chrono::seconds stop{std::stoi(timeout)};
    const auto c = sandglass::daemon::load_config_file(kShippedConfig);
    std::chrono::milliseconds longest_grace{0};
    for (const auto& [name, command] : c.commands) longest_grace = std::max(longest_grace, command.kill_grace);
    CHECK(stop > c.drain_timeout + longest_grace + c.limits.write_timeout);
  }

  TEST_CASE("systemd-analyze verify accepts the unit") {
    if (!std::filesystem::exists("/usr/bin/systemd-analyze")) {
      MESSAGE("skipped: systemd-analyze is not installed");
      return;
    }
    // The unit names the installed binary; verify checks that it exists, so point it at the
    // one just built.
    std::string text = unit_text();
    for (auto at = text.find(kInstalledBinary); at != std::string::npos; at = text.find(kInstalledBinary)) {
      text.replace(at, kInstalledBinary.size(), sandglass::testing::kSandglassdPath);
    }
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("sandglass-unit-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    std::ofstream{dir / "sandglassd.service"} << text;
    const Output out = run_shell("/usr/bin/systemd-analyze verify " + (dir / "sandglassd.service").string());
    std::filesystem::remove_all(dir);
    CHECK(out.exit_code == 0);
    CHECK(out.text == "");  // no warnings either: unknown keys and bad values are only warned about
  }
}
