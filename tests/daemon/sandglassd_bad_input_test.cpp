// Bad input against the real sandglassd, beyond what sandglassd_test.cpp (malformed JSON and
// budgets) and sandglassd_limits_test.cpp (each wire limit on its own) cover: more bad values,
// bytes that are not UTF-8 where a client can put them, and every kind of bad client at once
// while a well-behaved client keeps being served, after which the daemon's descriptors and
// resident memory return to where they were.
#include "daemon_test_support.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <cstddef>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace sandglass::testing;
using namespace std::chrono_literals;

namespace {

using Headers = std::vector<std::pair<std::string, std::string>>;

constexpr auto kPatience = 10s;
constexpr std::string_view kQuickJob = R"({"kind":"sleep","args":{"ms":0}})";

// The request line and header section of `request`.
std::string head_of(const std::string& request) {
  return request.substr(0, request.find("\r\n\r\n") + 4);
}

// A 400 answer whose JSON error names `field`; the body must parse as JSON.
void check_refused(const HttpAnswer& a, const std::string& field) {
  CHECK(a.status == 400);
  const boost::json::object body = json_of(a);  // throws if the answer is not JSON
  CHECK(body.at("field").as_string() == field);
  CHECK(!body.at("error").as_string().empty());
}

// The header name "x<i>". Built by appending: for `"x" + std::to_string(i)` GCC 12 at -O3 reports
// -Wrestrict inside std::string::insert (a memcpy of "9223372036854775810 or more bytes" for a
// one-character prefix: a false positive of GCC 12).
std::string numbered_header(int i) {
  std::string name{"x"};
  name += std::to_string(i);
  return name;
}

// Resident memory of `pid` in KiB (VmRSS), or 0.
std::size_t resident_kib(pid_t pid) {
  std::ifstream in{"/proc/" + std::to_string(pid) + "/status"};
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("VmRSS:")) return std::stoul(line.substr(6));
  }
  return 0;
}

// One answer on `c`, or nullopt when the connection closed first.
std::optional<HttpAnswer> ask(Connection& c, const std::string& request) {
  try {
    c.send(request);
  } catch (const std::runtime_error&) {
    return std::nullopt;  // closed and reset before the request went out
  }
  return c.read_answer(kPatience);
}

// A well-behaved client on its own keep-alive connection, submitting quick jobs and reading
// /healthz in a loop until stopped. Records every answer that is not 200.
class WellBehavedClient {
 public:
  explicit WellBehavedClient(std::uint16_t port) : connection_{port} {
    thread_ = std::thread{[this] { run(); }};
  }
  WellBehavedClient(const WellBehavedClient&) = delete;
  WellBehavedClient& operator=(const WellBehavedClient&) = delete;
  ~WellBehavedClient() { stop(); }

  // Stops the loop and closes the connection; returns what went wrong ("" if nothing).
  std::string stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
    connection_.close();
    std::lock_guard lock{mu_};
    return problems_;
  }
  std::size_t served() const { return served_.load(); }

 private:
  void run() {
    const std::string job = request_bytes("POST", "/v1/jobs", kQuickJob);
    const std::string health = request_bytes("GET", "/healthz");
    while (!stop_.load()) {
      for (const std::string* request : {&job, &health}) {
        const auto a = ask(connection_, *request);
        if (a && a->status == 200) {
          served_.fetch_add(1);
          continue;
        }
        std::lock_guard lock{mu_};
        problems_ += a ? "answered " + std::to_string(a->status) + ": " + a->body + "\n"
                       : std::string{"no answer\n"};
        return;
      }
    }
  }

  Connection connection_;
  std::atomic<bool> stop_{false};
  std::atomic<std::size_t> served_{0};
  std::mutex mu_;
  std::string problems_;  // guarded by mu_
  std::thread thread_;
};

}  // namespace

TEST_SUITE("sandglassd bad input") {
  TEST_CASE("more malformed requests are answered 400 naming the field" * doctest::timeout(60)) {
    DaemonProcess d{{"--config", write_temp_file("bad.toml",
        "[commands.cat]\nargv = [\"/bin/cat\"]\n")}};
    struct Case {
      std::string body;
      Headers headers;
      std::string query;
      std::string field;
    };
    const std::string job{kQuickJob};
    const Case cases[] = {
        // Not a JSON object at all.
        {"null", {}, "", "body"},
        {"\"sleep\"", {}, "", "body"},
        {"true", {}, "", "body"},
        {"{\"kind\":\"sleep\"} trailing", {}, "", "body"},
        {"{\"kind\":\"sleep\",}", {}, "", "body"},
        {"{'kind':'sleep'}", {}, "", "body"},
        {"{\"kind\":\"sleep\",\"args\":{\"ms\":01}}", {}, "", "body"},
        {"{\"kind\":\"sleep\",\"args\":{\"ms\":NaN}}", {}, "", "body"},
        {"{\"kind\":\"sleep\",\"args\":{\"ms\":1e400}}", {}, "", "args.ms"},  // infinity
        {std::string{"{\"kind\":\"sleep\"\0}", 17}, {}, "", "body"},
        // A key twice: which one counts would depend on the reader.
        {R"({"kind":"sleep","kind":"spin","args":{"ms":1}})", {}, "", "kind"},
        {R"({"kind":"exec","args":{"command":"cat","command":"rm"}})", {}, "", "args.command"},
        // Wrong types and missing fields.
        {"{}", {}, "", "kind"},
        {R"({"kind":""})", {}, "", "kind"},
        {R"({"kind":null})", {}, "", "kind"},
        {R"({"kind":"sleep","args":null})", {}, "", "args"},
        {R"({"kind":"sleep","args":"ms=5"})", {}, "", "args"},
        {R"({"kind":"sleep","args":{"ms":true}})", {}, "", "args.ms"},
        {R"({"kind":"sleep","args":{"ms":null}})", {}, "", "args.ms"},
        {R"({"kind":"sleep","args":{"ms":[5]}})", {}, "", "args.ms"},
        {R"({"kind":"sleep","args":{"ms":0},"priority":1})", {}, "", "priority"},
        {R"({"kind":"sleep","args":{"ms":0},"priority":"NORMAL"})", {}, "", "priority"},
        {R"({"kind":"sleep","args":{"ms":0},"idempotency_key":5})", {}, "", "idempotency_key"},
        {R"({"kind":"sleep","args":{"ms":0},"idempotency_key":")" + std::string(257, 'k') + "\"}",
         {}, "", "idempotency_key"},
        {R"({"kind":"sleep","args":{"ms":0},"timeout_ms":null})", {}, "", "timeout_ms"},
        {R"({"kind":"sleep","args":{"ms":0},"timeout_ms":1e20})", {}, "", "timeout_ms"},
        {R"({"kind":"exec","args":{"command":"cat","stdin":5}})", {}, "", "args.stdin"},
        {R"({"kind":"exec","args":{}})", {}, "", "args.command"},
        {R"({"kind":"forward","args":{"upstream":"none","body":{}}})", {}, "", "args.upstream"},
        // Numbers out of range.
        {R"({"kind":"sleep","args":{"ms":86400001}})", {}, "", "args.ms"},
        {R"({"kind":"sleep","args":{"ms":-9223372036854775808}})", {}, "", "args.ms"},
        {R"({"kind":"sleep","args":{"ms":18446744073709551615}})", {}, "", "args.ms"},
        {R"({"kind":"spin","args":{"ms":1.5}})", {}, "", "args.ms"},
        {R"({"kind":"sleep","args":{"ms":0},"timeout_ms":-9223372036854775808})", {}, "", "timeout_ms"},
        // Budgets in headers: negative, fractional, bad units, too many digits, overflowing.
        {job, {{"grpc-timeout", "-1S"}}, "", "grpc-timeout"},
        {job, {{"grpc-timeout", "1.5S"}}, "", "grpc-timeout"},
        {job, {{"grpc-timeout", "10 m"}}, "", "grpc-timeout"},
        {job, {{"grpc-timeout", "5s"}}, "", "grpc-timeout"},
        {job, {{"grpc-timeout", "5"}}, "", "grpc-timeout"},
        {job, {{"grpc-timeout", "m"}}, "", "grpc-timeout"},
        {job, {{"grpc-timeout", "100000000n"}}, "", "grpc-timeout"},
        {job, {{"grpc-timeout", "999999999999999999999H"}}, "", "grpc-timeout"},
        {job, {{"x-request-timeout-ms", "1e3"}}, "", "x-request-timeout-ms"},
        {job, {{"x-request-timeout-ms", "0x10"}}, "", "x-request-timeout-ms"},
        {job, {{"x-request-timeout-ms", "+5"}}, "", "x-request-timeout-ms"},
        {job, {{"x-request-timeout-ms", "5, 6"}}, "", "x-request-timeout-ms"},
        {job, {{"x-request-timeout-ms", "100"}, {"x-request-timeout-ms", "abc"}}, "", "x-request-timeout-ms"},
        {job, {{"idempotency-key", std::string(257, 'k')}}, "", "idempotency-key"},
        // The query.
        {job, {}, "?wait=maybe", "wait"},
        {job, {}, "?wait=true&later=1", "later"},
    };
    for (const Case& c : cases) {
      CAPTURE(c.body);
      CAPTURE(c.query);
      CAPTURE(c.field);
      check_refused(post_job(d.port(), c.body, c.headers, c.query), c.field);
    }
    // None of them became a job.
    CHECK(json_of(post_job(d.port(), job)).at("id").as_int64() == 1);
  }

  TEST_CASE("huge budgets are clamped to the maximum and zero budgets are too small" *
            doctest::timeout(60)) {
    DaemonProcess d{{"--default-budget-ms", "1000", "--max-budget-ms", "5000", "--min-budget-ms", "2"}};
    const std::string job{kQuickJob};
    SUBCASE("clamped") {
      const Headers huge[] = {
          {{"x-request-timeout-ms", "9223372036854775807"}},
          {{"x-request-timeout-ms", "99999999999999999999999999999"}},
          {{"grpc-timeout", "99999999H"}},
      };
      for (const Headers& h : huge) {
        CAPTURE(h.front().second);
        const HttpAnswer a = post_job(d.port(), job, h);
        CHECK(a.status == 200);
        CHECK(timing(json_of(a), "budget_ms") == 5000);
      }
      const HttpAnswer a = post_job(
          d.port(), R"({"kind":"sleep","args":{"ms":0},"timeout_ms":18446744073709551615})");
      CHECK(a.status == 200);
      CHECK(timing(json_of(a), "budget_ms") == 5000);
    }
    SUBCASE("too small") {
      const HttpAnswer answers[] = {
          post_job(d.port(), job, {{"x-request-timeout-ms", "0"}}),
          post_job(d.port(), job, {{"grpc-timeout", "0n"}}),
          post_job(d.port(), job, {{"grpc-timeout", "999u"}}),
          post_job(d.port(), R"({"kind":"sleep","args":{"ms":0},"timeout_ms":0})"),
          // The smallest of the three wins, even when the others are huge.
          post_job(d.port(), R"({"kind":"sleep","args":{"ms":0},"timeout_ms":99999999999})",
                   {{"x-request-timeout-ms", "1"}, {"grpc-timeout", "99999999H"}}),
      };
      for (const HttpAnswer& a : answers) {
        CAPTURE(a.body);
        CHECK(a.status == 504);
        CHECK(json_of(a).at("state").as_string() == "rejected");
        CHECK(json_of(a).at("reason").as_string() == "budget_too_small");
      }
    }
  }

  TEST_CASE("bytes that are not UTF-8 in a body header or query never break the JSON answer" *
            doctest::timeout(60)) {
    DaemonProcess d{{"--config", write_temp_file("utf8.toml",
        "[commands.cat]\nargv = [\"/bin/cat\"]\n")}};
    SUBCASE("in JSON strings: refused as invalid JSON") {
      const std::string bodies[] = {
          "{\"kind\":\"exec\",\"args\":{\"command\":\"cat\",\"stdin\":\"\xff\"}}",
          "{\"kind\":\"exec\",\"args\":{\"command\":\"cat\",\"stdin\":\"\xc0\xaf\"}}",      // overlong
          "{\"kind\":\"exec\",\"args\":{\"command\":\"cat\",\"stdin\":\"\xed\xa0\x80\"}}",  // surrogate
          "{\"kind\":\"exec\",\"args\":{\"command\":\"cat\",\"stdin\":\"\xf4\x90\x80\x80\"}}",  // > U+10FFFF
          "{\"kind\":\"exec\",\"args\":{\"command\":\"cat\",\"stdin\":\"\xe2\x82\"}}",      // cut short
          "{\"kind\":\"sleep\",\"\xff\":1}",
      };
      for (const std::string& body : bodies) {
        CAPTURE(body);
        check_refused(post_job(d.port(), body), "body");
      }
    }
    SUBCASE("a lone surrogate escape in a JSON string") {
      const HttpAnswer a =
          post_job(d.port(), R"({"kind":"exec","args":{"command":"cat","stdin":"a\ud800b"}})");
      check_refused(a, "body");
    }
    SUBCASE("in a budget header: refused with the value shown in ASCII") {
      const HttpAnswer a = post_job(d.port(), std::string{kQuickJob}, {{"x-request-timeout-ms", "12\xff\xfe"}});
      check_refused(a, "x-request-timeout-ms");
      CHECK(json_of(a).at("error").as_string().find("'12?" "?'") != std::string::npos);
      check_refused(post_job(d.port(), std::string{kQuickJob}, {{"grpc-timeout", "1\xc3\xa9m"}}),
                    "grpc-timeout");
    }
    SUBCASE("in an idempotency key header: refused, a key is stored as text") {
      check_refused(post_job(d.port(), std::string{kQuickJob}, {{"idempotency-key", "k\xff\xfe"}}),
                    "idempotency-key");
    }
    SUBCASE("in the query") {
      check_refused(post_job(d.port(), std::string{kQuickJob}, {}, "?wait=\xff"), "wait");
      const HttpAnswer a = post_job(d.port(), std::string{kQuickJob}, {}, "?\xff\xfe=1");
      CHECK(a.status == 400);
      CHECK(json_of(a).at("field").as_string() == "query");
    }
    SUBCASE("control characters in a header value: refused as malformed HTTP") {
      Connection c{d.port()};
      c.send(request_bytes("POST", "/v1/jobs", kQuickJob, {{"x-request-timeout-ms", std::string{"1\x01"}}}));
      const auto a = c.read_answer(kPatience);
      REQUIRE(a.has_value());
      check_refused(*a, "request");
    }
    CHECK(http(d.port(), "GET", "/healthz").status == 200);
  }

  TEST_CASE("thousands of small headers within the byte limit are served" * doctest::timeout(60)) {
    DaemonProcess d{{"--config", write_temp_file("headers.toml", "[server]\nmax_header_bytes = 65536\n")}};
    Headers headers;
    for (int i = 0; i < 5000; ++i) headers.emplace_back(numbered_header(i), "v");
    // A budget header among them counts: the smallest wins.
    headers.emplace_back("x-request-timeout-ms", "1234");
    const HttpAnswer a = post_job(d.port(), std::string{kQuickJob}, headers);
    CHECK(a.status == 200);
    CHECK(timing(json_of(a), "budget_ms") == 1234);
  }

  TEST_CASE("bad clients of every kind at once leave a well-behaved client served and descriptors and memory where they were" *
            doctest::timeout(240)) {
    constexpr std::size_t kMaxConnections = 48;
    DaemonProcess d{{"--config", write_temp_file("bad-clients.toml",
        "[server]\n"
        "max_body_bytes = 65536\n"
        "max_header_bytes = 8192\n"
        "max_connections = " + std::to_string(kMaxConnections) + "\n"
        "read_timeout_ms = 1500\n"
        "write_timeout_ms = 1000\n"
        "idle_timeout_ms = 1500\n"
        "[records]\n"
        "keep_ms = 1000\n"
        "[commands.big]\n"
        "argv = [\"/usr/bin/head\", \"-c\", \"1000000\", \"/dev/zero\"]\n"
        "max_output_bytes = 1000000\n")},
        // A fixed mmap threshold: glibc otherwise raises it to the size of the largest block
        // freed (the 1 MB outputs, the answers), keeps later blocks of that size in the heap,
        // and gives them back to the system only when the heap's top happens to be free, so
        // what is resident after a round varied by 12 MiB between runs (14.7 MiB after the
        // warm-up one time, 25 the next). With the threshold fixed, large blocks are mapped and
        // unmapped, and what stays resident is what the daemon holds.
        {"/usr/bin/env", "GLIBC_TUNABLES=glibc.malloc.mmap_threshold=131072"}};
    REQUIRE(eventually([&] { return d.log().find("listening on") != std::string::npos; }));
    const std::size_t idle_fds = open_fds(d.pid());
    const std::size_t cold_kib = resident_kib(d.pid());

    // One round of every bad client, one after another (the silent ones all at once).
    const auto bad_clients = [&] {
      // Malformed JSON, a wrong type, a bad budget header, bytes that are not UTF-8.
      check_refused(post_job(d.port(), "{\"kind\":"), "body");
      check_refused(post_job(d.port(), R"({"kind":"sleep","args":{"ms":"1"}})"), "args.ms");
      check_refused(post_job(d.port(), std::string{kQuickJob}, {{"grpc-timeout", "123456789m"}}), "grpc-timeout");
      check_refused(post_job(d.port(), "{\"kind\":\"\xff\"}"), "body");
      // A body past the limit, a header section past it, thousands of headers.
      {
        Connection c{d.port()};
        const auto a = ask(c, request_bytes("POST", "/v1/jobs", std::string(70'000, ' ')));
        REQUIRE(a.has_value());
        CHECK(a->status == 413);
        CHECK(c.closed_by_server(kPatience));
      }
      {
        Connection c{d.port()};
        const auto a = ask(c, request_bytes("GET", "/healthz", {}, {{"x-big", std::string(9000, 'a')}}));
        REQUIRE(a.has_value());
        CHECK(a->status == 431);
        CHECK(c.closed_by_server(kPatience));
      }
      {
        Headers many;
        for (int i = 0; i < 3000; ++i) many.emplace_back(numbered_header(i), "v");
        Connection c{d.port()};
        const auto a = ask(c, request_bytes("GET", "/healthz", {}, many));
        REQUIRE(a.has_value());
        CHECK(a->status == 431);
      }
      // Silent and half-sent requests, and a client that leaves mid-body: all at once.
      std::vector<std::unique_ptr<Connection>> silent;
      for (int i = 0; i < 10; ++i) {
        silent.push_back(std::make_unique<Connection>(d.port()));
        if (i % 2 == 1) silent.back()->send(head_of(request_bytes("POST", "/v1/jobs", kQuickJob)));
      }
      {
        Connection leaving{d.port()};
        const std::string request = request_bytes("POST", "/v1/jobs", kQuickJob);
        leaving.send(request.substr(0, request.size() - 5));
      }
      // A client that sends a byte every second: closed after read_timeout, before it is done.
      {
        Connection slow{d.port()};
        const std::string request = request_bytes("POST", "/v1/jobs", kQuickJob);
        std::size_t sent = 0;
        bool closed = false;
        while (sent < request.size() && !closed) {
          try {
            slow.send(request.substr(sent++, 1));
          } catch (const std::runtime_error&) {
            closed = true;
            break;
          }
          closed = slow.closed_by_server(1s);
        }
        CHECK(closed);
        CHECK(sent < request.size());  // a timeout per read would have let it finish
      }
      for (auto& c : silent) CHECK(c->closed_by_server(kPatience));
      silent.clear();
      // A client that never reads its 6 MB answers: closed after write_timeout. Its FIN waits
      // behind the unsent answer, so the client cannot see it without reading; the daemon's
      // descriptors show it (the well-behaved client's connection is the one left open).
      {
        const std::string submitted = R"(sandglass_jobs_submitted_total{kind="exec",priority="normal"})";
        const double before = metric(d.port(), submitted);
        Connection greedy{d.port()};
        std::string pipelined;
        for (int i = 0; i < 4; ++i) {
          pipelined += request_bytes("POST", "/v1/jobs", R"({"kind":"exec","args":{"command":"big"}})");
        }
        greedy.send(pipelined);
        CHECK(eventually([&] { return metric(d.port(), submitted) > before; }, kPatience));
        CHECK(eventually([&] { return open_fds(d.pid()) == idle_fds + 1; }, kPatience));
        CHECK(greedy.closed_by_server(kPatience));  // reads what was sent before the close
      }
      // More connections than the limit: those past it are closed without an answer.
      {
        std::vector<std::unique_ptr<Connection>> flood;
        std::size_t served = 0;
        std::size_t refused = 0;
        for (std::size_t i = 0; i < kMaxConnections + 12; ++i) {
          flood.push_back(std::make_unique<Connection>(d.port()));
          const auto a = ask(*flood.back(), request_bytes("GET", "/healthz"));
          if (a) {
            CHECK(a->status == 200);
            ++served;
          } else {
            ++refused;
          }
        }
        CHECK(served >= 1);
        CHECK(served < kMaxConnections);  // the well-behaved client holds one
        CHECK(refused >= 12);
        flood.clear();
        // Until the daemon has seen them go, new connections would be closed at once.
        CHECK(eventually([&] { return open_fds(d.pid()) == idle_fds + 1; }, kPatience));
      }
    };

    WellBehavedClient client{d.port()};
    bad_clients();  // warm-up: the allocator reaches the sizes these need
    REQUIRE(eventually([&] { return open_fds(d.pid()) == idle_fds + 1; }, kPatience));
    const std::size_t warm_kib = resident_kib(d.pid());
    for (int round = 0; round < 2; ++round) bad_clients();
    const std::size_t served_during = client.served();
    const std::string problems = client.stop();
    CHECK(problems == "");
    CHECK(served_during > 0);

    // Every descriptor the bad clients cost is given back, exactly.
    CHECK(eventually([&] { return open_fds(d.pid()) == idle_fds; }, kPatience));
    // Resident memory comes back to within 8 MiB of what it was after the warm-up round:
    // allocators keep freed memory, so equality is not to be expected, but a leak of what a
    // round costs (a 6 MB answer, 64 KiB bodies, dozens of connections) would exceed it in two
    // rounds. (Seen: 12.1 MiB at start, 14.4-15.0 after the warm-up, 14.8-16.9 at the end.)
    // Not under ASan, whose quarantine holds freed memory on purpose, nor TSan, whose
    // allocator is its own.
    std::size_t end_kib = resident_kib(d.pid());
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    MESSAGE("resident memory bound not checked under a sanitizer");
#else
    constexpr std::size_t kBoundKib = 8 * 1024;
    CHECK(eventually([&] {
      end_kib = resident_kib(d.pid());
      return end_kib <= warm_kib + kBoundKib;
    }, kPatience));
#endif
    MESSAGE("VmRSS: " << cold_kib << " KiB at start, " << warm_kib << " KiB after the warm-up round, "
            << end_kib << " KiB after two more rounds; " << served_during
            << " answers to the well-behaved client meanwhile");
    CHECK(http(d.port(), "GET", "/healthz").status == 200);
  }
}
