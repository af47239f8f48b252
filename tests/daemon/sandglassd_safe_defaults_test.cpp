// Safe defaults of the real sandglassd: exec and forward reach only what the config names, no
// secret or request content reaches the log, and the daemon runs as an unprivileged user.
#include "daemon_test_support.hpp"
#include "test_paths.hpp"

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace sandglass::testing;
using namespace std::chrono_literals;

namespace {

using Headers = std::vector<std::pair<std::string, std::string>>;

// A loopback listening socket that accepts nothing: a connection to it stays pending, so
// `connected()` tells whether anyone tried.
class Listener {
 public:
  Listener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(fd_, 16) == 0);
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  ~Listener() { ::close(fd_); }
  std::uint16_t port() const { return port_; }
  bool connected() const {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;
  }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

// A file holding `text` with mode 0600.
std::string secret_file(const std::string& text) {
  const std::string path = write_temp_file("token", text);
  ::chmod(path.c_str(), 0600);
  return path;
}

std::string proc_status_line(pid_t pid, const std::string& name) {
  std::ifstream in{"/proc/" + std::to_string(pid) + "/status"};
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with(name + ":")) return line;
  }
  return {};
}

}  // namespace

TEST_SUITE("sandglassd safe defaults") {
  TEST_CASE("exec and forward refuse a command or upstream the config does not name" *
            doctest::timeout(60)) {
    const Listener named;
    const Listener elsewhere;  // what a smuggled URL points at
    const std::string to = "127.0.0.1:" + std::to_string(elsewhere.port());
    DaemonProcess d{{"--config", write_temp_file("named.toml",
        "[commands.cat]\nargv = [\"/bin/cat\"]\n"
        "[upstreams.next]\nurl = \"http://127.0.0.1:" + std::to_string(named.port()) + "/v1/jobs\"\n")}};
    struct Case {
      std::string args;
      std::string kind;
      std::string field;
    };
    const Case cases[] = {
        {R"({"command":"/bin/sh"})", "exec", "args.command"},
        {R"({"command":"../../bin/sh"})", "exec", "args.command"},
        {R"({"command":"cat;id"})", "exec", "args.command"},
        {R"({"command":["/bin/sh","-c","id"]})", "exec", "args.command"},
        {R"({"command":"cat","argv":["/bin/sh","-c","id"]})", "exec", "args.argv"},
        {R"({"command":"cat","env":{"LD_PRELOAD":"/tmp/x.so"}})", "exec", "args.env"},
        {R"({"command":"cat","working_directory":"/root"})", "exec", "args.working_directory"},
        {R"({"upstream":"http://)" + to + R"(/v1/jobs","body":{}})", "forward", "args.upstream"},
        {R"({"upstream":")" + to + R"(","body":{}})", "forward", "args.upstream"},
        {R"({"upstream":"next","url":"http://)" + to + R"(/","body":{}})", "forward", "args.url"},
        {R"({"upstream":"next","target":"/admin","body":{}})", "forward", "args.target"},
        {R"({"upstream":"next","headers":{"host":"x"},"body":{}})", "forward", "args.headers"},
    };
    for (const Case& c : cases) {
      CAPTURE(c.args);
      const HttpAnswer a = post_job(d.port(), R"({"kind":")" + c.kind + R"(","args":)" + c.args + "}");
      CHECK(a.status == 400);
      CHECK(json_of(a).at("field").as_string() == c.field);
      CHECK(!json_of(a).at("error").as_string().empty());
    }
    // None of them became a job, and nothing was connected to.
    CHECK(json_of(post_job(d.port(), R"({"kind":"sleep","args":{"ms":0}})")).at("id").as_int64() == 1);
    CHECK_FALSE(elsewhere.connected());
    CHECK_FALSE(named.connected());
  }

  TEST_CASE("no token body stdin or header content reaches the log even at trace level" *
            doctest::timeout(90)) {
    constexpr std::string_view kMarker = "MARKER-5f3a9c";
    const std::string token = "tok-Yb41-secret";
    const std::string token_path = secret_file(token + "\n");
    std::string format = "text";
    SUBCASE("text") {}
    SUBCASE("json") { format = "json"; }
    const std::string config = write_temp_file("leak.toml",
        "[server]\nmax_body_bytes = 4096\nmax_header_bytes = 4096\n"
        "[commands.cat]\nargv = [\"/bin/cat\"]\n"
        "[commands.fail]\nargv = [\"/bin/sh\", \"-c\", \"cat >&2; exit 3\"]\n"
        "[upstreams.dead]\nurl = \"http://127.0.0.1:" + std::to_string(free_port()) + "/v1/jobs\"\n"
        "max_attempts = 1\n");
    DaemonProcess d{{"--config", config, "--auth-token-file", token_path, "--log-level", "trace",
                     "--log-format", format}};
    const std::string m{kMarker};
    const Headers auth{{"Authorization", "Bearer " + token}};
    const auto with_auth = [&](Headers more) {
      more.insert(more.end(), auth.begin(), auth.end());
      return more;
    };

    // The content does pass through the daemon: it is in the answer.
    const HttpAnswer echoed =
        post_job(d.port(), R"({"kind":"exec","args":{"command":"cat","stdin":")" + m + R"("}})", auth);
    REQUIRE(echoed.status == 200);
    CHECK(echoed.body.find(m) != std::string::npos);
    // A failed command whose stderr and error carry the marker.
    const HttpAnswer failed =
        post_job(d.port(), R"({"kind":"exec","args":{"command":"fail","stdin":")" + m + R"("}})", auth);
    CHECK(failed.status == 500);
    CHECK(failed.body.find(m) != std::string::npos);
    // A forward that fails to connect, with the marker in its body.
    const HttpAnswer forwarded = post_job(
        d.port(), R"({"kind":"forward","args":{"upstream":"dead","body":{"secret":")" + m + R"("}}})", auth);
    CHECK(forwarded.status >= 500);
    // Bad requests that carry the marker in every place a client can put it.
    struct Bad {
      std::string query;
      std::string body;
      Headers headers;
      int status;
    };
    const Bad bad[] = {
        {"", R"({"kind":"exec","args":{"command":"cat","stdin":")" + m, with_auth({}), 400},
        {"", R"({"kind":")" + m + R"("})", with_auth({}), 400},
        {"", R"({"kind":"sleep",")" + m + R"(":1})", with_auth({}), 400},
        {"", R"({"kind":"exec","args":{"command":")" + m + R"("}})", with_auth({}), 400},
        {"?" + m + "=1", R"({"kind":"sleep","args":{"ms":0}})", with_auth({}), 400},
        {"?wait=" + m, R"({"kind":"sleep","args":{"ms":0}})", with_auth({}), 400},
        {"", R"({"kind":"sleep","args":{"ms":0}})", with_auth({{"grpc-timeout", m}}), 400},
        {"", R"({"kind":"sleep","args":{"ms":0}})", {{"Authorization", "Bearer " + m}}, 401},
        {"", R"({"kind":"sleep","args":{"ms":0},"stdin":")" + m + R"("})", {{"Authorization", m}}, 401},
        {"", R"({"kind":"sleep","args":{"ms":0},"x":")" + m + std::string(5000, 'x') + R"("})",
         with_auth({}), 413},
        {"", R"({"kind":"sleep","args":{"ms":0}})", with_auth({{"X-Secret", m + std::string(5000, 'x')}}), 431},
    };
    for (const Bad& b : bad) {
      CAPTURE(b.body);
      CHECK(post_job(d.port(), b.body, b.headers, b.query).status == b.status);
    }
    // Good requests with the marker in a header and as the idempotency key.
    CHECK(post_job(d.port(), R"({"kind":"sleep","args":{"ms":0}})",
                   with_auth({{"X-Secret", m}, {"idempotency-key", m}}))
              .status == 200);
    CHECK(post_job(d.port(), R"({"kind":"sleep","args":{"ms":0},"idempotency_key":")" + m + R"("})", auth)
              .status == 200);

    d.signal(SIGTERM);
    REQUIRE(d.wait_exit(30s) == 0);
    const std::string log = d.log();
    // The daemon did log at debug level, on the paths above...
    CHECK(log.find("POST /v1/jobs -> 200") != std::string::npos);
    CHECK(log.find("POST /v1/jobs -> 400") != std::string::npos);
    CHECK(log.find("POST /v1/jobs -> 401") != std::string::npos);
    CHECK(log.find("refused request -> 413") != std::string::npos);
    CHECK(log.find("refused request -> 431") != std::string::npos);
    CHECK(log.find("(exec) ended failed handler_error") != std::string::npos);
    CHECK(log.find("(forward) ended failed") != std::string::npos);
    // ...and none of it names the marker or the token.
    CHECK(log.find(m) == std::string::npos);
    CHECK(log.find(token) == std::string::npos);
    std::filesystem::remove(token_path);
  }

  TEST_CASE("the daemon runs and serves a job as an unprivileged user" * doctest::timeout(60)) {
    if (::geteuid() != 0) {
      MESSAGE("skipped: runs only as root, which can switch to the user nobody");
      return;
    }
    const passwd* nobody = ::getpwnam("nobody");
    REQUIRE(nobody != nullptr);
    const std::string uid = std::to_string(nobody->pw_uid);
    const std::string gid = std::to_string(nobody->pw_gid);
    const std::vector<std::string> as_nobody{"/usr/bin/setpriv", "--reuid=" + uid, "--regid=" + gid,
                                             "--clear-groups", "--no-new-privs", "--"};
    std::string probe;
    for (const std::string& part : as_nobody) probe += part + " ";
    if (std::system((probe + "/usr/bin/test -x " + sandglass::testing::kSandglassdPath).c_str()) != 0) {
      MESSAGE("skipped: nobody cannot reach " << sandglass::testing::kSandglassdPath
              << " (a folder on the way is private)");
      return;
    }
    // The token file belongs to the daemon's user, as systemd's LoadCredential arranges.
    const std::string token_path = secret_file("tok-unprivileged\n");
    REQUIRE(::chown(token_path.c_str(), nobody->pw_uid, nobody->pw_gid) == 0);
    const std::string config = write_temp_file("nobody.toml",
        "[commands.whoami]\nargv = [\"/usr/bin/id\", \"-u\"]\n");
    ::chmod(config.c_str(), 0644);
    DaemonProcess d{{"--config", config, "--auth-token-file", token_path}, as_nobody};
    CHECK(proc_status_line(d.pid(), "Uid") == "Uid:\t" + uid + "\t" + uid + "\t" + uid + "\t" + uid);
    CHECK(proc_status_line(d.pid(), "CapEff") == "CapEff:\t0000000000000000");
    CHECK(proc_status_line(d.pid(), "NoNewPrivs") == "NoNewPrivs:\t1");
    const HttpAnswer a = post_job(d.port(), R"({"kind":"exec","args":{"command":"whoami"}})",
                                  {{"Authorization", "Bearer tok-unprivileged"}});
    REQUIRE(a.status == 200);
    CHECK(json_of(a).at("result").as_object().at("stdout").as_string() == uid + "\n");
    d.signal(SIGTERM);
    CHECK(d.wait_exit(30s) == 0);
    std::filesystem::remove(token_path);
  }
}
