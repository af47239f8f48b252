// A short soak: a few seconds of about 10x the workers' capacity against the real sandglassd,
// then SIGTERM in the middle of the same overload. The long soak with RSS figures is
// `sandglass-overload --soak 60s` (bench/README.md); this test checks the accounting only.
#include "daemon_test_support.hpp"

#include <doctest/doctest.h>

#include <signal.h>

#include <atomic>
#include <map>
#include <sstream>
#include <thread>
#include <vector>

using namespace sandglass::testing;
using namespace std::chrono_literals;

namespace {

// Jobs by terminal state, and how many jobs the daemon was handed.
struct Counts {
  std::uint64_t submitted = 0;
  std::map<std::string, std::uint64_t> by_state;

  friend bool operator==(const Counts&, const Counts&) = default;
  Counts operator-(const Counts& earlier) const {
    Counts d{.submitted = submitted - earlier.submitted};
    for (const auto& [state, n] : by_state) {
      const auto it = earlier.by_state.find(state);
      d.by_state[state] = n - (it == earlier.by_state.end() ? 0 : it->second);
    }
    return d;
  }
};

doctest::String describe(const Counts& c) {
  std::string out = "submitted=" + std::to_string(c.submitted);
  for (const auto& [state, n] : c.by_state) out += " " + state + "=" + std::to_string(n);
  return out.c_str();
}

constexpr const char* kStates[] = {"completed", "failed", "rejected", "expired", "cancelled"};

Counts zero_counts() {
  Counts c;
  for (const char* s : kStates) c.by_state[s] = 0;
  return c;
}

// sandglass_jobs_total summed by state; sandglass_jobs_submitted_total summed.
Counts counts_from_metrics(std::uint16_t port) {
  Counts c = zero_counts();
  std::istringstream lines{http(port, "GET", "/metrics").body};
  for (std::string line; std::getline(lines, line);) {
    const auto value = [&] { return std::stod(line.substr(line.find_last_of(' ') + 1)); };
    if (line.starts_with("sandglass_jobs_total{")) {
      const auto at = line.find("state=\"") + 7;
      c.by_state[line.substr(at, line.find('"', at) - at)] += static_cast<std::uint64_t>(value());
    } else if (line.starts_with("sandglass_jobs_submitted_total{")) {
      c.submitted += static_cast<std::uint64_t>(value());
    }
  }
  return c;
}

// The drain summary, "stopped: submitted=5 completed=3 failed=0 rejected=0 expired=0
// cancelled=2 drained_in_time=true"; nullopt when the log has none.
std::optional<Counts> counts_from_drain_summary(const std::string& log) {
  const auto at = log.rfind("stopped: ");
  if (at == std::string::npos) return std::nullopt;
  std::istringstream fields{log.substr(at + 9, log.find('\n', at) - at - 9)};
  Counts c;
  for (std::string field; fields >> field;) {
    const auto eq = field.find('=');
    if (eq == std::string::npos || field.starts_with("drained_in_time")) continue;
    const std::string key = field.substr(0, eq);
    const std::uint64_t n = std::stoull(field.substr(eq + 1));
    if (key == "submitted") {
      c.submitted = n;
    } else {
      c.by_state[key] = n;
    }
  }
  return c;
}

// Client threads, each on one keep-alive connection, each offering `per_thread_rate` sleep
// jobs per second (paced, not waiting between answers beyond the answer itself). A request
// without an answer (the connection failed) is "not taken"; a thread ends when asked to or
// when it cannot connect any more.
class Overload {
 public:
  Overload(std::uint16_t port, std::size_t threads, double per_thread_rate) {
    for (std::size_t t = 0; t < threads; ++t) {
      slots_.emplace_back(std::make_unique<Slot>());
      Slot& slot = *slots_.back();
      threads_.emplace_back([this, port, per_thread_rate, &slot] { run(port, per_thread_rate, slot); });
    }
  }
  ~Overload() { stop(); }

  // Blocks until every thread ended.
  void stop() {
    stop_.store(true);
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  // After stop(): the answers by state ("" for none), and how many requests found none.
  Counts answers() const {
    Counts c = zero_counts();
    for (const auto& s : slots_) {
      for (const auto& [state, n] : s->by_state) {
        c.by_state[state] += n;
        c.submitted += n;
      }
    }
    return c;
  }
  std::uint64_t not_taken() const {
    std::uint64_t n = 0;
    for (const auto& s : slots_) n += s->not_taken;
    return n;
  }
  std::uint64_t other_answers() const {
    std::uint64_t n = 0;
    for (const auto& s : slots_) n += s->other;
    return n;
  }

 private:
  struct Slot {
    std::map<std::string, std::uint64_t> by_state;
    std::uint64_t not_taken = 0;
    std::uint64_t other = 0;  // an answer that is not a job's outcome
  };

  void run(std::uint16_t port, double rate, Slot& slot) {
    const auto every = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>{1.0 / rate});
    const std::string request =
        request_bytes("POST", "/v1/jobs", R"({"kind":"sleep","args":{"ms":20},"timeout_ms":100})");
    std::unique_ptr<Connection> conn;
    auto next = std::chrono::steady_clock::now();
    while (!stop_.load()) {
      if (!conn) {
        try {
          conn = std::make_unique<Connection>(port);
        } catch (const std::runtime_error&) {
          return;  // nobody listens any more
        }
      }
      std::optional<HttpAnswer> a;
      try {
        conn->send(request);
        a = conn->read_answer(30s);
      } catch (const std::runtime_error&) {
      }
      if (!a) {
        ++slot.not_taken;
        conn.reset();
        continue;
      }
      const auto body = boost::json::parse(a->body);
      const auto* state = body.is_object() ? body.as_object().if_contains("state") : nullptr;
      if (state != nullptr && state->is_string()) {
        ++slot.by_state[std::string{state->as_string()}];
      } else {
        ++slot.other;
      }
      if (a->header("connection") == "close") conn.reset();
      // Pacing the offered load; a thread behind its schedule sends at once.
      next += every;
      std::this_thread::sleep_until(next);
    }
  }

  std::atomic<bool> stop_{false};
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<std::thread> threads_;  // last: joined before the slots go
};

}  // namespace

TEST_SUITE("sandglassd soak") {

TEST_CASE("under 10x overload and a SIGTERM in the middle of it every accepted job gets exactly one answer" *
          doctest::timeout(180)) {
  // Capacity: 2 workers x 20 ms jobs = 100 jobs/s. Offered: 48 threads x 20.8/s = 1000/s; with
  // 100 ms budgets admission takes about 8 queued jobs, so most of the 48 are refused at once.
  constexpr std::size_t kThreads = 48;
  constexpr double kRatePerThread = 1000.0 / kThreads;
  constexpr auto kDrainTimeout = 3000ms;
  constexpr auto kAnswersGrace = 10000ms;  // server.write_timeout_ms: answers may take this long
  constexpr auto kMargin = 20000ms;        // a loaded machine
  DaemonProcess daemon{{"--workers", "2", "--capacity", "16", "--drain-timeout-ms",
                        std::to_string(kDrainTimeout.count()), "--log-level", "info"}};
  const std::uint16_t port = daemon.port();
  const pid_t pid = daemon.pid();

  REQUIRE(post_job(port, R"({"kind":"sleep","args":{"ms":20}})").status == 200);
  std::size_t baseline = 0;
  REQUIRE(eventually([&] {
    const std::size_t a = open_fds(pid);
    std::this_thread::sleep_for(200ms);  // two equal readings: the count has settled
    baseline = open_fds(pid);
    return a == baseline;
  }));

  const Counts before_load = counts_from_metrics(port);
  {
    Overload load{port, kThreads, kRatePerThread};
    std::this_thread::sleep_for(5s);  // the length of the overload
    load.stop();
    const Counts answers = load.answers();
    INFO("answers: ", describe(answers));
    CHECK(load.not_taken() == 0);
    CHECK(load.other_answers() == 0);
    CHECK(answers.by_state.at("completed") > 0);
    CHECK(answers.by_state.at("rejected") > answers.by_state.at("completed"));  // overloaded
    const Counts counted = counts_from_metrics(port) - before_load;
    INFO("daemon's metrics: ", describe(counted));
    CHECK(counted == answers);
  }
  // Every connection of the overload is closed: the daemon's descriptors are back.
  const bool fds_back = eventually([&] { return open_fds(pid) == baseline; });
  const std::size_t fds_after = open_fds(pid);
  INFO("fds after the overload: ", fds_after, "; baseline: ", baseline);
  CHECK(fds_back);

  // SIGTERM in the middle of the same overload.
  const Counts before_stop = counts_from_metrics(port);
  Overload load{port, kThreads, kRatePerThread};
  std::this_thread::sleep_for(2s);  // the overload before the signal
  const auto signalled = std::chrono::steady_clock::now();
  daemon.signal(SIGTERM);
  const std::optional<int> code = daemon.wait_exit(kDrainTimeout + kAnswersGrace + kMargin);
  const auto exit_after = std::chrono::steady_clock::now() - signalled;
  load.stop();
  const std::string log = daemon.log();
  INFO("log: ", log);
  REQUIRE(code.has_value());
  CHECK(*code == 0);
  // A generous bound (kMargin is 20 s): it only catches a drain that does not end.
  CHECK(exit_after < kDrainTimeout + kAnswersGrace + kMargin);

  const std::optional<Counts> stopped = counts_from_drain_summary(log);
  REQUIRE(stopped.has_value());
  const Counts counted = *stopped - before_stop;
  const Counts answers = load.answers();
  INFO("answers: ", describe(answers), "; not taken: ", load.not_taken());
  INFO("daemon's drain summary minus before: ", describe(counted));
  CHECK(load.other_answers() == 0);
  CHECK(answers.by_state.at("completed") > 0);
  CHECK(answers.by_state.at("rejected") > 0);
  // Every job the daemon accepted got exactly one answer: these states match exactly.
  for (const char* state : {"completed", "failed", "expired", "cancelled"}) {
    INFO("state: ", state);
    CHECK(counted.by_state.at(state) == answers.by_state.at(state));
  }
  // Refusals too: the drain closes connections between requests and waits until every request
  // it read has had its answer before it stops the server.
  CHECK(counted.by_state.at("rejected") == answers.by_state.at("rejected"));
  CHECK(counted.submitted == answers.submitted);
  CHECK(log.find("drained_in_time=true") != std::string::npos);
}

}  // TEST_SUITE
