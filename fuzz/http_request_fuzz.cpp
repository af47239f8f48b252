// Fuzzes the daemon's HTTP request path without a socket: raw bytes -> parse_http_request (the
// server's Beast parser, checks and limits) -> Api::handle, for each pipelined request on the
// connection as long as it stays open (at most kMaxRequests per input).
//
// The Api is real: a Runtime with two workers, the builtin kinds with no commands and no
// upstreams (exec and forward reject every request, so nothing is spawned or dialled), and
// budgets of at most 2 ms, so that sleep and spin end quickly. Before an input is done, every
// answer has arrived and no job is queued or running, so nothing piles up across inputs. An
// input of odd length plays a client that leaves while it waits for its answer.
//
// Checks: every request gets exactly one answer; every answer to bad input is a 4xx; a JSON
// answer is valid JSON (so also valid UTF-8); no 500 (these kinds never fail a job).
#include "fuzz_check.hpp"

#include "daemon/api/api.hpp"
#include "daemon/http/http_parse.hpp"
#include "daemon/api/job_records.hpp"
#include "daemon/metrics.hpp"

#include <sandglass/daemon/daemon_config.hpp>
#include <sandglass/daemon/kind_registry.hpp>
#include <sandglass/runtime.hpp>

#include <boost/json/parse.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string_view>
#include <thread>

namespace {

using namespace sandglass::daemon;
using namespace std::chrono_literals;

constexpr int kMaxRequests = 8;

DaemonConfig fuzz_config() {
  DaemonConfig config;
  config.runtime.workers = 2;
  config.runtime.capacity = 8;
  config.runtime.budget = {.min_useful = 100us, .default_budget = 2ms, .max_budget = 2ms,
                           .reserve = 100us};
  // Small limits, so that inputs of a few kilobytes reach them.
  config.limits.max_header_bytes = 1024;
  config.limits.max_body_bytes = 2048;
  config.records = {.keep = 1000ms, .max_count = 64, .max_bytes = 1 << 20};
  config.validate();
  return config;
}

// What the daemon holds, minus the server. Lives for the whole run.
struct Harness {
  Harness() = default;
  ~Harness() { runtime.shutdown(sandglass::Duration::zero()); }

  const DaemonConfig config = fuzz_config();
  const KindRegistry kinds = builtin_kinds(config);
  std::atomic<bool> draining{false};
  DaemonMetrics metrics;
  JobRecords records{config.records};
  sandglass::Runtime runtime{config.runtime};
  Api api{config, kinds, runtime, records, metrics, draining};
};

// Counts answers still to come; answers arrive on workers when a request waits for its job.
class Answers {
 public:
  void expect() {
    std::lock_guard lock{mu_};
    ++pending_;
  }
  void arrived(const HttpResponse& r) {
    check(r);
    std::lock_guard lock{mu_};
    FUZZ_CHECK(pending_ > 0);
    --pending_;
    cv_.notify_all();
  }
  // Blocks until every expected answer has arrived.
  void wait_all() {
    std::unique_lock lock{mu_};
    const bool all = cv_.wait_for(lock, 10s, [this] { return pending_ == 0; });
    FUZZ_CHECK(all);
  }

  static void check(const HttpResponse& r) {
    FUZZ_CHECK(r.status >= 200 && r.status <= 599 && r.status != 500);
    if (r.content_type == "application/json") {
      boost::system::error_code ec;
      boost::json::parse(r.body, ec);
      FUZZ_CHECK(!ec);
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int pending_ = 0;
};

void wait_until_idle(sandglass::Runtime& runtime) {
  for (int i = 0; i < 100'000; ++i) {
    const sandglass::RuntimeStats stats = runtime.stats();
    if (stats.queued == 0 && stats.running == 0) return;
    std::this_thread::sleep_for(20us);
  }
  FUZZ_CHECK(false && "jobs still queued or running long after their budget");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Harness harness;
  std::string_view bytes{reinterpret_cast<const char*>(data), size};
  const bool client_leaves = size % 2 == 1;

  Answers answers;
  for (int i = 0; i < kMaxRequests && !bytes.empty(); ++i) {
    HttpParse parsed = parse_http_request(bytes, harness.config.limits);
    if (parsed.status == HttpParse::Status::answer_and_close) {
      Answers::check(parsed.answer);
      FUZZ_CHECK(parsed.answer.status >= 400 && parsed.answer.status < 500);
      break;
    }
    if (parsed.status == HttpParse::Status::incomplete) break;
    FUZZ_CHECK(parsed.consumed > 0 && parsed.consumed <= bytes.size());

    answers.expect();
    const Api::ClientGone gone =
        harness.api.handle(parsed.request, [&answers](HttpResponse r) { answers.arrived(r); });
    if (gone && client_leaves) gone();
    if (!parsed.keep_alive) break;
    bytes.remove_prefix(parsed.consumed);
  }
  answers.wait_all();
  wait_until_idle(harness.runtime);
  return 0;
}
