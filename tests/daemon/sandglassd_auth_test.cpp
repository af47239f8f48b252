// The bearer token at the wire: the real sandglassd with server.auth_token_file set.
#include "config/config_test_support.hpp"
#include "daemon_test_support.hpp"

#include <doctest/doctest.h>

#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

using namespace sandglass::testing;
using namespace std::chrono_literals;

namespace {

constexpr std::string_view kToken = "Zq8-token_4fV";
constexpr std::string_view kQuickJob = R"({"kind":"sleep","args":{"ms":0}})";

// A token file (mode 0600) holding kToken and a newline; removed at the end of the scope.
TokenFile token_file() { return TokenFile{std::string{kToken} + "\n"}; }

using Headers = std::vector<std::pair<std::string, std::string>>;

Headers bearer(std::string_view token) { return {{"Authorization", "Bearer " + std::string{token}}}; }

// Checks a 401 answer: the header, the JSON error naming the field, and that it repeats neither
// the real token nor what the client sent.
void check_unauthorized(const HttpAnswer& a, std::string_view sent = {}) {
  CHECK(a.status == 401);
  CHECK(a.header("www-authenticate") == "Bearer");
  const boost::json::object body = json_of(a);
  CHECK(body.at("field").as_string() == "authorization");
  CHECK(!body.at("error").as_string().empty());
  CHECK(a.body.find(kToken) == std::string::npos);
  if (!sent.empty()) CHECK(a.body.find(sent) == std::string::npos);
}

}  // namespace

TEST_SUITE("sandglassd auth") {
  TEST_CASE("with a token every jobs endpoint answers 401 without it and serves with it" *
            doctest::timeout(60)) {
    const TokenFile token = token_file();
    std::vector<std::string> args;
    SUBCASE("set by the flag") { args = {"--auth-token-file", token.path()}; }
    SUBCASE("set in the config file") {
      args = {"--config", write_temp_file("auth.toml", "[server]\nauth_token_file = \"" +
                                                           token.path() + "\"\n")};
    }
    DaemonProcess d{args};
    const std::string job{kQuickJob};
    const std::string wrong = "Zq8-token_4fW";
    check_unauthorized(post_job(d.port(), job));
    check_unauthorized(post_job(d.port(), job, bearer(wrong)), wrong);
    check_unauthorized(post_job(d.port(), job, bearer(kToken.substr(0, 5))));
    check_unauthorized(post_job(d.port(), job, bearer(std::string{kToken} + "x")));
    check_unauthorized(post_job(d.port(), job, {{"Authorization", "Basic " + std::string{kToken}}}));
    check_unauthorized(post_job(d.port(), job, {{"Authorization", std::string{kToken}}}));
    // Checked before the body is parsed: a malformed body is still 401, not 400.
    check_unauthorized(post_job(d.port(), "{not json"));
    // Records, cancelling, the wrong method and unknown paths too.
    check_unauthorized(http(d.port(), "GET", "/v1/jobs/1"));
    check_unauthorized(http(d.port(), "DELETE", "/v1/jobs/1", {}, bearer(wrong)));
    check_unauthorized(http(d.port(), "GET", "/v1/jobs"));
    check_unauthorized(http(d.port(), "GET", "/nowhere"));
    CHECK(metric(d.port(), R"(sandglass_http_responses_total{code="401"})") == 11);
    // Nothing was submitted, and the right token is served.
    const HttpAnswer ok = post_job(d.port(), job, bearer(kToken));
    REQUIRE(ok.status == 200);
    CHECK(json_of(ok).at("id").to_number<std::uint64_t>() == 1);
    CHECK(json_of(ok).at("state").as_string() == "completed");
    const HttpAnswer record = http(d.port(), "GET", "/v1/jobs/1", {}, bearer(kToken));
    CHECK(record.status == 200);
    CHECK(json_of(record).at("kind").as_string() == "sleep");
    CHECK(http(d.port(), "GET", "/nowhere", {}, bearer(kToken)).status == 404);
  }

  TEST_CASE("health readiness and metrics stay open when a token is set" * doctest::timeout(60)) {
    const TokenFile token = token_file();
    DaemonProcess d{{"--auth-token-file", token.path()}};
    CHECK(http(d.port(), "GET", "/healthz").status == 200);
    CHECK(http(d.port(), "GET", "/readyz").status == 200);
    const HttpAnswer m = http(d.port(), "GET", "/metrics");
    CHECK(m.status == 200);
    CHECK(m.body.find("sandglass_workers") != std::string::npos);
    // A wrong token on an open path does not matter either.
    CHECK(http(d.port(), "GET", "/healthz", {}, bearer("wrong")).status == 200);
  }

  TEST_CASE("a 401 closes the connection after its answer, a new one with the token is served" *
            doctest::timeout(60)) {
    const TokenFile token = token_file();
    DaemonProcess d{{"--auth-token-file", token.path()}};
    Connection c{d.port()};
    c.send(request_bytes("POST", "/v1/jobs", kQuickJob));
    const auto refused = c.read_answer();
    REQUIRE(refused.has_value());
    check_unauthorized(*refused);
    CHECK(refused->header("connection") == "close");
    CHECK(c.closed_by_server(std::chrono::seconds{10}));
    CHECK(post_job(d.port(), std::string{kQuickJob}, bearer(kToken)).status == 200);
  }

  TEST_CASE("without a token the jobs endpoints need no Authorization header" * doctest::timeout(60)) {
    DaemonProcess d;
    CHECK(post_job(d.port(), std::string{kQuickJob}).status == 200);
    CHECK(post_job(d.port(), std::string{kQuickJob}, bearer("anything")).status == 200);
  }

  TEST_CASE("a token file that cannot be used stops the start with exit code 2 naming the key" *
            doctest::timeout(60)) {
    const std::string open_to_all = write_temp_file("token", std::string{kToken} + "\n");
    ::chmod(open_to_all.c_str(), 0644);
    const std::string empty = write_temp_file("token", "");
    ::chmod(empty.c_str(), 0600);
    SUBCASE("readable by others, by the flag") {
      const RunResult r = run_sandglassd({"--auth-token-file", open_to_all});
      CHECK(r.exit_code == 2);
      CHECK(r.err.starts_with("sandglassd: --auth-token-file: \"" + open_to_all + "\" may be read"));
      CHECK(r.err.find(kToken) == std::string::npos);
    }
    SUBCASE("empty, in the config file") {
      const RunResult r = run_sandglassd({"--config", write_temp_file("auth.toml",
          "[server]\nauth_token_file = \"" + empty + "\"\n")});
      CHECK(r.exit_code == 2);
      CHECK(r.err == "sandglassd: server.auth_token_file: \"" + empty + "\" is empty\n");
    }
    SUBCASE("missing, checked by --check-config") {
      const RunResult r = run_sandglassd({"--auth-token-file", "/nonexistent/token", "--check-config"});
      CHECK(r.exit_code == 2);
      CHECK(r.err ==
            "sandglassd: --auth-token-file: cannot read \"/nonexistent/token\": No such file or directory\n");
    }
    std::filesystem::remove(open_to_all);
    std::filesystem::remove(empty);
  }
}
