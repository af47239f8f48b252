// A real Prometheus (Debian's /usr/bin/prometheus, which `make test` installs) scrapes a real
// sandglassd every second; the test reads the series back through Prometheus's own HTTP query
// API. Also checks the shipped deploy/prometheus files with promtool. Only 127.0.0.1 is used.
#include "daemon_test_support.hpp"
#include "test_paths.hpp"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json/array.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

using namespace sandglass::testing;
using boost::json::object;
namespace fs = std::filesystem;

namespace {

constexpr const char* kPrometheus = "/usr/bin/prometheus";
constexpr const char* kPromtool = "/usr/bin/promtool";
const std::string kDeploy = sandglass::testing::source_path("deploy/prometheus");

std::string slurp(const fs::path& path) {
  std::ifstream in{path};
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A fresh folder under the temporary folder, removed with everything in it at the end.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "sandglass-prometheus-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error{"mkdtemp failed"};
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Spawns argv with stdout and stderr to `log` and an environment without proxy settings.
pid_t spawn(const std::vector<std::string>& args, const fs::path& log) {
  std::vector<std::string> text = args;
  std::vector<char*> argv;
  for (std::string& s : text) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::string path_env = "PATH=/usr/bin:/bin";
  char* envp[] = {path_env.data(), nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error{"cannot start " + args[0] + ": " + std::strerror(rc)};
  return pid;
}

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

// Runs a command to its end. Blocks.
CommandResult run(const std::vector<std::string>& args, const TempDir& dir) {
  const fs::path log = dir.path() / "command.log";
  const pid_t pid = spawn(args, log);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), slurp(log)};
}

// Prometheus on 127.0.0.1 with its storage in `dir`; stopped (SIGTERM, then SIGKILL after
// 30 s) by its pid when the object goes.
class PrometheusProcess {
 public:
  PrometheusProcess(const fs::path& config, const TempDir& dir)
      : port_{free_port()}, log_{dir.path() / "prometheus.log"} {
    pid_ = spawn({kPrometheus, "--config.file=" + config.string(),
                  "--storage.tsdb.path=" + (dir.path() / "data").string(),
                  "--web.listen-address=127.0.0.1:" + std::to_string(port_)},
                 log_);
  }
  PrometheusProcess(const PrometheusProcess&) = delete;
  PrometheusProcess& operator=(const PrometheusProcess&) = delete;
  ~PrometheusProcess() { stop(); }

  std::uint16_t port() const { return port_; }
  std::string log() const { return slurp(log_); }
  bool running() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == 0) return true;
    pid_ = -1;  // it ended on its own: reaped here
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return false;
  }

  // Its exit code after SIGTERM (128 + signal when it had to be killed), or the code it
  // ended with on its own.
  int stop() {
    if (pid_ <= 0) return exit_code_;
    ::kill(pid_, SIGTERM);
    int status = 0;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds{30};
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > until) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds{10});  // polling a child's exit
    }
    pid_ = -1;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return exit_code_;
  }

 private:
  std::uint16_t port_;
  fs::path log_;
  pid_t pid_ = -1;
  int exit_code_ = -1;
};

std::string url_encode(const std::string& text) {
  std::string out;
  for (const unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

// An instant query through Prometheus's HTTP API: each result series as its labels (without
// __name__, "k=v,k=v" sorted) and value. Empty on any error (Prometheus not ready yet).
std::map<std::string, double> query(std::uint16_t port, const std::string& promql) {
  std::map<std::string, double> out;
  HttpAnswer a;
  try {
    a = http(port, "GET", "/api/v1/query?query=" + url_encode(promql));
  } catch (const std::runtime_error&) {
    return out;
  }
  if (a.status != 200) return out;
  const object body = json_of(a);
  for (const auto& r : body.at("data").as_object().at("result").as_array()) {
    std::vector<std::string> pairs;
    for (const auto& [k, v] : r.as_object().at("metric").as_object()) {
      if (k != "__name__") pairs.push_back(std::string{k} + "=" + std::string{v.as_string()});
    }
    std::sort(pairs.begin(), pairs.end());
    std::string labels;
    for (const std::string& pair : pairs) labels += (labels.empty() ? "" : ",") + pair;
    out[labels] = std::stod(std::string{r.as_object().at("value").as_array().at(1).as_string()});
  }
  return out;
}

std::string describe(const std::map<std::string, double>& series) {
  std::string out = "{";
  for (const auto& [labels, v] : series) out += " {" + labels + "} " + std::to_string(v) + ";";
  return out + " }";
}

// Polls the query until it answers exactly `expected` (labels, values) or 60 s pass.
void require_series(std::uint16_t port, const std::string& promql,
                    const std::map<std::string, double>& expected) {
  std::map<std::string, double> last;
  const bool arrived = eventually([&] { return (last = query(port, promql)) == expected; },
                                  std::chrono::seconds{60});
  INFO("query: ", promql);
  INFO("expected: ", describe(expected));
  INFO("Prometheus answered: ", describe(last));
  CHECK(arrived);
}

void require_tools() {
  REQUIRE_MESSAGE(fs::exists(kPrometheus),
                  kPrometheus, " is missing: install Debian's prometheus package (make test does)");
  REQUIRE_MESSAGE(fs::exists(kPromtool),
                  kPromtool, " is missing: install Debian's prometheus package (make test does)");
}

}  // namespace

TEST_SUITE("Prometheus") {

TEST_CASE("the shipped rules and scrape config pass promtool and the rules pass their unit tests" *
          doctest::timeout(120)) {
  require_tools();
  TempDir dir;
  const std::string rules = kDeploy + "/sandglass-rules.yml";

  const CommandResult check_rules = run({kPromtool, "check", "rules", rules}, dir);
  INFO(check_rules.output);
  CHECK(check_rules.exit_code == 0);
  CHECK(check_rules.output.find("SUCCESS: 14 rules found") != std::string::npos);

  // The example config names its rule file relative to itself: a copy that names the shipped
  // rules by their absolute path.
  std::string config = slurp(kDeploy + "/prometheus.yml");
  const std::string relative = "  - sandglass-rules.yml\n";
  REQUIRE(config.find(relative) != std::string::npos);
  config.replace(config.find(relative), relative.size(), "  - " + rules + "\n");
  const fs::path copy = dir.path() / "prometheus.yml";
  std::ofstream{copy} << config;
  const CommandResult check_config = run({kPromtool, "check", "config", copy.string()}, dir);
  INFO(check_config.output);
  CHECK(check_config.exit_code == 0);

  const CommandResult unit_tests =
      run({kPromtool, "test", "rules", kDeploy + "/sandglass-rules.test.yml"}, dir);
  INFO(unit_tests.output);
  CHECK(unit_tests.exit_code == 0);
  CHECK(unit_tests.output.find("SUCCESS") != std::string::npos);
}

TEST_CASE("Prometheus scrapes sandglassd and its query API returns the sandglass series with the expected values" *
          doctest::timeout(240)) {
  require_tools();
  TempDir dir;
  // An upstream nobody listens on, whose breaker opens after one failure and stays open.
  const std::uint16_t nobody = free_port();
  const std::string daemon_config = write_temp_file(
      "prometheus.toml", "[upstreams.down]\nurl = \"http://127.0.0.1:" + std::to_string(nobody) +
                             "/v1/jobs\"\nmax_attempts = 1\nfailure_threshold = 1\n"
                             "cooldown_ms = 600000\n");
  DaemonProcess daemon{{"--config", daemon_config, "--workers", "2", "--min-budget-ms", "50",
                        "--log-level", "warn"}};

  const fs::path config = dir.path() / "prometheus.yml";
  std::ofstream{config} << "global:\n"
                           "  scrape_interval: 1s\n"
                           "  evaluation_interval: 1s\n"
                           "rule_files:\n"
                           "  - " << kDeploy << "/sandglass-rules.yml\n"
                           "scrape_configs:\n"
                           "  - job_name: sandglassd\n"
                           "    static_configs:\n"
                           "      - targets: [\"127.0.0.1:" << daemon.port() << "\"]\n";
  PrometheusProcess prometheus{config, dir};
  const std::string instance = "instance=127.0.0.1:" + std::to_string(daemon.port());
  INFO("Prometheus log:\n", prometheus.log());

  // Scraping before any job: the series below are born when the jobs happen.
  const bool up = eventually([&] { return query(prometheus.port(), "up") == std::map<std::string, double>{{instance + ",job=sandglassd", 1}}; },
                             std::chrono::seconds{90});
  REQUIRE_MESSAGE(up, "Prometheus did not scrape sandglassd within 90 s; running: ", prometheus.running(),
                  "; its log:\n", prometheus.log());

  // 3 completed, 2 rejected (budget_too_small), 1 cancelled by its caller while running.
  for (int i = 0; i < 3; ++i) {
    REQUIRE(post_job(daemon.port(), R"({"kind":"sleep","args":{"ms":1}})").status == 200);
  }
  for (int i = 0; i < 2; ++i) {
    REQUIRE(post_job(daemon.port(), R"({"kind":"sleep","args":{"ms":1},"timeout_ms":10})").status == 504);
  }
  // Says it is short (expected_ms), so that admission takes it and the jobs behind it.
  const HttpAnswer queued = post_job(daemon.port(), R"({"kind":"sleep","expected_ms":1,"args":{"ms":60000}})", {}, "?wait=false");
  REQUIRE(queued.status == 202);
  const auto id = json_of(queued).at("id").as_int64();
  REQUIRE(eventually([&] { return state_of(daemon.port(), static_cast<std::uint64_t>(id)) == "running"; }));
  REQUIRE(cancel_job(daemon.port(), static_cast<std::uint64_t>(id)).at("state").as_string() == "cancelled");
  // 2 forward jobs to the dead upstream: the first fails to connect and opens the breaker, the
  // second is refused by the breaker.
  const std::string forward = R"({"kind":"forward","args":{"upstream":"down","body":{}}})";
  REQUIRE(post_job(daemon.port(), forward).status == 500);
  const HttpAnswer refused = post_job(daemon.port(), forward);
  CHECK(refused.status == 503);
  CHECK(json_of(refused).at("reason").as_string() == "breaker_open");

  const std::uint16_t p = prometheus.port();
  const std::string sleep_series = instance + ",job=sandglassd,kind=sleep";
  require_series(p, "sandglass_jobs_submitted_total{kind=\"sleep\"}",
                 {{sleep_series + ",priority=normal", 6}});
  require_series(p, "sum by (instance, job, kind, state) (sandglass_jobs_total)",
                 {{sleep_series + ",state=completed", 3},
                  {sleep_series + ",state=rejected", 2},
                  {sleep_series + ",state=cancelled", 1},
                  {instance + ",job=sandglassd,kind=forward,state=failed", 2}});
  require_series(p, "sandglass_jobs_total{kind=\"sleep\", state=\"completed\"}",
                 {{sleep_series + ",priority=normal,reason=ok,state=completed", 3}});
  require_series(p, "sandglass_rejections_total",
                 {{sleep_series + ",reason=budget_too_small", 2}});
  require_series(p, "sandglass_cancellations_total",
                 {{"cause=caller," + sleep_series, 1}});
  require_series(p, "sandglass_jobs_total{reason=\"breaker_open\"}",
                 {{instance + ",job=sandglassd,kind=forward,priority=normal,reason=breaker_open,state=failed", 1}});
  require_series(p, "sandglass_upstream_breaker_state",
                 {{instance + ",job=sandglassd,upstream=down", 2}});
  // (200 also counts the scrapes and the polls above.)
  require_series(p, "sandglass_http_responses_total{code=~\"202|500|503|504\"}",
                 {{"code=202," + instance + ",job=sandglassd", 1},
                  {"code=500," + instance + ",job=sandglassd", 1},
                  {"code=503," + instance + ",job=sandglassd", 1},
                  {"code=504," + instance + ",job=sandglassd", 2}});
  // The shipped rules, evaluated every second: a recording rule and an alert.
  require_series(p, "sandglass:upstream_breaker_open", {{instance + ",upstream=down", 1}});
  require_series(p, "count by (alertname, upstream) (ALERTS{alertname=\"SandglassUpstreamBreakerOpen\"})",
                 {{"alertname=SandglassUpstreamBreakerOpen,upstream=down", 1}});

  CHECK(prometheus.stop() == 0);
}

}  // TEST_SUITE
