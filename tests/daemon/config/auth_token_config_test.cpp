// server.auth_token_file and --auth-token-file: the bearer token read from a file when the key is
// read, and the errors for files that cannot serve as one.
#include <sandglass/daemon/daemon_config.hpp>

#include "config_test_support.hpp"
#include "daemon_process.hpp"
#include "daemon/config/command_line.hpp"

#include <doctest/doctest.h>

#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

using sandglass::daemon::apply_setting;
using sandglass::daemon::DaemonConfig;
using sandglass::daemon::parse_command_line;
using sandglass::daemon::parse_config;
using sandglass::testing::parse_error;
using sandglass::testing::TokenFile;
using sandglass::testing::validate_error;
using sandglass::testing::thrown_by;
using sandglass::testing::Thrown;
using sandglass::testing::write_temp_file;

namespace {

constexpr std::string_view kToken = "tok-7Hq2_x9";

std::string config_naming(const std::string& path) {
  return "[server]\nauth_token_file = \"" + path + "\"\n";
}

Thrown file_error(const std::string& path) { return parse_error(config_naming(path)); }

}  // namespace

TEST_SUITE("server.auth_token_file") {
  TEST_CASE("no token is required by default") {
    const DaemonConfig c = parse_config("");
    CHECK(c.auth_token.empty());
    CHECK(c.auth_token_file.empty());
  }

  TEST_CASE("the token is read from the file without its trailing newline") {
    std::string text{kToken};
    SUBCASE("no newline") {}
    SUBCASE("a newline") { text += "\n"; }
    SUBCASE("CR LF") { text += "\r\n"; }
    SUBCASE("several newlines") { text += "\n\n"; }
    mode_t mode = 0600;
    SUBCASE("read-only for the owner") { mode = 0400; }
    const TokenFile file{text, mode};
    const DaemonConfig c = parse_config(config_naming(file.path()));
    CHECK(c.auth_token == kToken);
    CHECK(c.auth_token_file == file.path());
    CHECK(validate_error(c).what == "no error");
  }

  TEST_CASE("a file that cannot serve as a token file is an error naming the key and the file") {
    std::string expected;
    std::string path;
    std::string text{kToken};
    mode_t mode = 0600;
    SUBCASE("missing") {
      path = "/nonexistent/token";
      expected = "cannot read \"/nonexistent/token\": No such file or directory";
    }
    // clear() and a built string, not `text = "..."`: GCC 12 at -O3 warns (-Werror=restrict) of
    // a bogus overlap in that assignment's inlined memcpy.
    SUBCASE("empty") {
      text.clear();
      expected = "is empty";
    }
    SUBCASE("only a newline") {
      text = std::string(1, '\n');
      expected = "is empty";
    }
    SUBCASE("readable by group") {
      mode = 0640;
      expected = "may be read or written by group or others (mode 0640); make it 0600 or 0400";
    }
    SUBCASE("readable by others") {
      mode = 0604;
      expected = "may be read or written by group or others (mode 0604); make it 0600 or 0400";
    }
    SUBCASE("writable by group") {
      mode = 0620;
      expected = "(mode 0620)";
    }
    SUBCASE("two lines") {
      text = std::string{kToken} + "\nsecond-line";
      expected = "must be one line of visible ASCII characters";
    }
    SUBCASE("a space inside") {
      text = "tok en";
      expected = "must be one line of visible ASCII characters";
    }
    SUBCASE("bytes that are not ASCII") {
      text = "tok\xc3\xa9n";
      expected = "must be one line of visible ASCII characters";
    }
    SUBCASE("longer than 4096 bytes") {
      text = std::string(4097, 'k');
      expected = "holds more than 4096 bytes";
    }
    SUBCASE("a directory") {
      path = std::filesystem::temp_directory_path().string();
      expected = "is not a regular file";
    }
    const TokenFile file{text, mode};
    if (path.empty()) path = file.path();
    const Thrown e = file_error(path);
    CHECK(e.key == "server.auth_token_file");
    CHECK(e.what.find(expected) != std::string::npos);
    CHECK(e.what.find("\"" + path + "\"") != std::string::npos);
    if (!text.empty()) CHECK(e.what.find(text.substr(0, 5)) == std::string::npos);
  }

  TEST_CASE("a value that is not a string is an error naming the key") {
    const Thrown e = parse_error("[server]\nauth_token_file = 5\n");
    CHECK(e.key == "server.auth_token_file");
    CHECK(e.what == "server.auth_token_file: must be a path to a file holding the token, got 5");
  }

  TEST_CASE("apply_setting reads the file and an empty path turns the token off") {
    const TokenFile file{std::string{kToken} + "\n"};
    DaemonConfig c;
    apply_setting(c, "server.auth_token_file", file.path());
    CHECK(c.auth_token == kToken);
    apply_setting(c, "server.auth_token_file", "");
    CHECK(c.auth_token.empty());
    CHECK(c.auth_token_file.empty());
  }

  TEST_CASE("validate checks a token set in code") {
    DaemonConfig c;
    c.auth_token = "two words";
    CHECK(validate_error(c).what ==
          "server.auth_token_file: the token must be one line of visible ASCII characters (no "
          "spaces or control characters)");
    c.auth_token.clear();
    c.auth_token_file = "/etc/sandglass/token";
    const Thrown e = validate_error(c);
    CHECK(e.key == "server.auth_token_file");
    CHECK(e.what.find("no token was read from it") != std::string::npos);
    c.auth_token = "fine";
    CHECK(validate_error(c).what == "no error");
  }

  TEST_CASE("--auth-token-file sets the token and its errors name the flag") {
    const TokenFile good{std::string{kToken} + "\n"};
    const TokenFile open_to_all{std::string{kToken}, 0644};
    const auto parse = [](std::vector<const char*> args) {
      args.insert(args.begin(), "sandglassd");
      return parse_command_line(static_cast<int>(args.size()), args.data());
    };
    CHECK(parse({"--auth-token-file", good.path().c_str()}).config.auth_token == kToken);
    const Thrown e = thrown_by([&] { (void)parse({"--auth-token-file", open_to_all.path().c_str()}); });
    CHECK(e.key == "--auth-token-file");
    CHECK(e.what.find("(mode 0644)") != std::string::npos);
    // The flag overrides the file's key; an empty one turns the token off.
    const std::string config = write_temp_file("auth.toml", config_naming(good.path()));
    CHECK(parse({"--config", config.c_str()}).config.auth_token == kToken);
    CHECK(parse({"--config", config.c_str(), "--auth-token-file", ""}).config.auth_token.empty());
    std::filesystem::remove(config);
  }
}
