// A mixed workload through the real sandglassd: several kinds (exec, spin, sleep), all four
// priority classes and budgets from 5 ms to 60 s in one queue. An admission bug once hid behind
// tests that gave every job the same budget: with one budget, "the work queued ahead" and "the
// work EDF runs first" are the same thing. Here they differ by seconds.
//
// One worker, held by a job that ends when the test says so, makes the order of the run exact:
// each exec job appends its tag to a log file when it starts.
#include "daemon_test_support.hpp"

#include <doctest/doctest.h>

#include <boost/json/serialize.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using namespace sandglass::testing;
using boost::json::object;

namespace {

struct Submitted {
  std::uint64_t id = 0;
  std::string kind;
  std::string priority;
};

// The exec command `name` appends its stdin to `log` and then runs `then` (shell words).
std::string logging_command(const std::string& name, const std::string& log, const std::string& then) {
  return "[commands." + name + "]\nargv = [\"/bin/sh\", \"-c\", \"cat >> " + log + "; " + then +
         "\"]\nenv = { PATH = \"/usr/bin:/bin\" }\nallow_stdin = true\n";
}

std::string exec_job(const std::string& command, const std::string& tag, const std::string& priority,
                     int timeout_ms) {
  return R"({"kind":"exec","args":{"command":")" + command + R"(","stdin":")" + tag +
         R"(\n"},"priority":")" + priority + R"(","timeout_ms":)" + std::to_string(timeout_ms) + "}";
}

std::string builtin_job(const std::string& kind, int ms, const std::string& priority, int timeout_ms) {
  return R"({"kind":")" + kind + R"(","args":{"ms":)" + std::to_string(ms) + R"(},"priority":")" +
         priority + R"(","timeout_ms":)" + std::to_string(timeout_ms) + "}";
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in{path};
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Every sample of one counter family in /metrics: the label set as rendered -> value.
std::map<std::string, double> samples_of(std::uint16_t port, const std::string& family) {
  std::istringstream body{http(port, "GET", "/metrics").body};
  std::map<std::string, double> samples;
  for (std::string line; std::getline(body, line);) {
    if (!line.starts_with(family + "{")) continue;
    const auto space = line.rfind(' ');
    samples[line.substr(family.size(), space - family.size())] = std::stod(line.substr(space + 1));
  }
  return samples;
}

double sum_of(const std::map<std::string, double>& samples) {
  double sum = 0;
  for (const auto& [labels, value] : samples) sum += value;
  return sum;
}

}  // namespace

TEST_SUITE("sandglassd mixed workload") {
  TEST_CASE("kinds classes and budgets mixed: the urgent job EDF runs next is admitted, the order is "
            "EDF within class, every job has one outcome and the counters add up" *
            doctest::timeout(120)) {
    const std::string log = write_temp_file("mixed.log", "");
    const std::string gate = log + ".gate";
    std::filesystem::remove(gate);
    const std::string config = write_temp_file(
        "mixed.toml",
        "[runtime]\nworkers = 1\ncapacity = 64\nestimate_max_age_ms = 600000\n" +
            logging_command("hold", log, "while [ ! -e " + gate + " ]; do sleep 0.02; done") +
            logging_command("step", log, "sleep 1") + logging_command("mark", log, "true"));
    DaemonProcess d{{"--config", config, "--min-budget-ms", "10"}};
    std::vector<Submitted> jobs;
    const auto submit = [&](const std::string& body, const std::string& kind, const std::string& priority,
                            const std::string& query = "?wait=false") {
      const HttpAnswer a = post_job(d.port(), body, {}, query);
      const std::uint64_t id = json_of(a).at("id").to_number<std::uint64_t>();
      jobs.push_back({id, kind, priority});
      return a;
    };

    // Run times to learn from: the step's 1 s, and quick ones for the rest.
    for (int i = 0; i < 2; ++i) {
      REQUIRE(submit(exec_job("step", "warm", "normal", 10'000), "exec", "normal", "").status == 200);
      REQUIRE(submit(exec_job("mark", "warm", "normal", 10'000), "exec", "normal", "").status == 200);
      REQUIRE(submit(builtin_job("spin", 20, "high", 10'000), "spin", "high", "").status == 200);
      REQUIRE(submit(builtin_job("sleep", 0, "critical", 10'000), "sleep", "critical", "").status == 200);
    }

    // The one worker is held; behind it, seconds of long-deadline work of several classes.
    const HttpAnswer hold = submit(exec_job("hold", "hold", "normal", 60'000), "exec", "normal");
    REQUIRE(hold.status == 202);
    REQUIRE(eventually([&] { return lines_of(log).size() == 5; }));  // 4 warm-ups + hold
    for (const char* tag : {"n1", "n2", "n3", "n4"}) {
      REQUIRE(submit(exec_job("step", tag, "normal", 60'000), "exec", "normal").status == 202);
    }
    REQUIRE(submit(exec_job("step", "s1", "sheddable", 60'000), "exec", "sheddable").status == 202);
    const HttpAnswer s2 = submit(exec_job("step", "s2", "sheddable", 60'000), "exec", "sheddable");
    REQUIRE(s2.status == 202);
    for (int i = 0; i < 2; ++i) REQUIRE(submit(builtin_job("spin", 20, "high", 30'000), "spin", "high").status == 202);
    REQUIRE(submit(builtin_job("sleep", 1, "normal", 30'000), "sleep", "normal").status == 202);

    // Urgent: 3 s, behind 6 s of queued work in arrival order, but EDF runs it after only the
    // two high-class spins (40 ms): admitted. Counting all queued work would refuse it.
    const HttpAnswer urgent = submit(exec_job("mark", "u1", "normal", 3000), "exec", "normal");
    CHECK(urgent.status == 202);
    const HttpAnswer critical = submit(builtin_job("sleep", 0, "critical", 3000), "sleep", "critical");
    CHECK(critical.status == 202);
    // Refused, each for its own reason: the step's own 1 s does not fit in 300 ms; a sheddable
    // job waits for all the higher classes' work (over 4 s), which does not fit in 2 s; 5 ms is
    // below the minimum useful budget.
    const HttpAnswer implausible = submit(exec_job("step", "x", "high", 300), "exec", "high");
    CHECK(implausible.status == 503);
    CHECK(json_of(implausible).at("reason").as_string() == "deadline_implausible");
    const HttpAnswer behind = submit(builtin_job("sleep", 1, "sheddable", 2000), "sleep", "sheddable");
    CHECK(behind.status == 503);
    CHECK(json_of(behind).at("reason").as_string() == "deadline_implausible");
    const HttpAnswer tiny = submit(builtin_job("spin", 1, "high", 5), "spin", "high");
    CHECK(tiny.status == 504);
    CHECK(json_of(tiny).at("reason").as_string() == "budget_too_small");
    // One queued job cancelled by its caller.
    const object cancelled = cancel_job(d.port(), json_of(s2).at("id").to_number<std::uint64_t>());
    CHECK(cancelled.at("reason").as_string() == "cancelled_in_queue");

    std::ofstream{gate}.flush();  // the hold ends: the worker runs the queue
    for (const Submitted& j : jobs) {
      INFO("job " << j.id);
      REQUIRE(eventually([&] { return terminal(state_of(d.port(), j.id)); }, std::chrono::seconds{60}));
    }

    // The order of the run: the urgent job right after the hold (the spins and the critical
    // sleep log nothing), the normal steps, then the sheddable one left.
    const std::vector<std::string> logged = lines_of(log);
    REQUIRE(logged.size() >= 4);
    const std::vector<std::string> ran{logged.begin() + 4, logged.end()};  // after the warm-ups
    CHECK(ran == std::vector<std::string>{"hold", "u1", "n1", "n2", "n3", "n4", "s1"});

    // Exactly one outcome per job: the records, counted by series, are what the counters say.
    std::map<std::string, double> expected_outcomes;
    std::map<std::string, double> expected_submitted;
    std::map<std::string, int> by_state;
    for (const Submitted& j : jobs) {
      const object r = json_of(http(d.port(), "GET", "/v1/jobs/" + std::to_string(j.id)));
      const std::string state{r.at("state").as_string()};
      const std::string reason{r.at("reason").as_string()};
      ++by_state[state];
      expected_outcomes[R"({kind=")" + j.kind + R"(",priority=")" + j.priority + R"(",reason=")" + reason +
                        R"(",state=")" + state + R"("})"] += 1;
      expected_submitted[R"({kind=")" + j.kind + R"(",priority=")" + j.priority + R"("})"] += 1;
    }
    CHECK(by_state == std::map<std::string, int>{{"cancelled", 1}, {"completed", 19}, {"rejected", 3}});
    const auto outcomes = samples_of(d.port(), "sandglass_jobs_total");
    const auto submitted = samples_of(d.port(), "sandglass_jobs_submitted_total");
    CHECK(outcomes == expected_outcomes);
    CHECK(submitted == expected_submitted);
    CHECK(sum_of(submitted) == static_cast<double>(jobs.size()));
    CHECK(sum_of(outcomes) == sum_of(submitted));
    const object stats = json_of(http(d.port(), "GET", "/v1/stats"));
    CHECK(stats.at("submitted_total").to_number<std::int64_t>() == static_cast<std::int64_t>(jobs.size()));
    std::filesystem::remove(gate);
  }
}
