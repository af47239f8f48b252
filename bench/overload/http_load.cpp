#include "http_load.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include <fmt/core.h>

#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <vector>

namespace sandglass::bench {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;
using Done = std::function<void(beast::error_code, Response&)>;

// One keep-alive connection carrying one request at a time. Connects on first use.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  explicit Connection(asio::io_context& ioc) : stream_{ioc} {}

  bool reusable() const noexcept { return connected_; }

  void exchange(const tcp::endpoint& endpoint, Request request, Done done) {
    request_ = std::move(request);
    done_ = std::move(done);
    if (connected_) return write();
    stream_.async_connect(endpoint, [self = shared_from_this()](beast::error_code ec) {
      if (ec) return self->fail(ec);
      self->connected_ = true;
      beast::error_code ignored;
      self->stream_.socket().set_option(tcp::no_delay{true}, ignored);
      self->write();
    });
  }

 private:
  void write() {
    response_ = {};
    http::async_write(stream_, request_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec) return self->fail(ec);
      http::async_read(self->stream_, self->buffer_, self->response_,
                       [self](beast::error_code rec, std::size_t) {
                         if (rec) return self->fail(rec);
                         if (!self->response_.keep_alive()) self->close();
                         Done d = std::move(self->done_);
                         d({}, self->response_);
                       });
    });
  }

  void fail(beast::error_code ec) {
    close();
    Done d = std::move(done_);
    d(ec, response_);
  }

  void close() {
    connected_ = false;
    beast::error_code ignored;
    stream_.socket().close(ignored);
    buffer_.clear();
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  Request request_;
  Response response_;
  Done done_;
  bool connected_ = false;
};

// Idle connections to reuse, and at most `max` open at once.
class ConnectionPool {
 public:
  ConnectionPool(asio::io_context& ioc, tcp::endpoint endpoint, std::size_t max)
      : ioc_{ioc}, endpoint_{endpoint}, max_{max} {}

  // False when every connection is busy and no more may be opened.
  bool send(Request request, Done done) {
    std::shared_ptr<Connection> c;
    if (!idle_.empty()) {
      c = std::move(idle_.back());
      idle_.pop_back();
    } else if (open_ < max_) {
      c = std::make_shared<Connection>(ioc_);
      ++open_;
      ++opened_;
    } else {
      return false;
    }
    c->exchange(endpoint_, std::move(request), [this, c, done = std::move(done)](beast::error_code ec, Response& r) {
      if (!ec && c->reusable()) {
        idle_.push_back(c);
      } else {
        --open_;
      }
      done(ec, r);
    });
    return true;
  }

  std::size_t opened() const noexcept { return opened_; }

 private:
  asio::io_context& ioc_;
  tcp::endpoint endpoint_;
  std::size_t max_;
  std::vector<std::shared_ptr<Connection>> idle_;
  std::size_t open_ = 0;
  std::size_t opened_ = 0;
};

Request make_request(http::verb verb, const std::string& path, const HttpTarget& t, std::string body) {
  Request req{verb, path, 11};
  req.set(http::field::host, fmt::format("{}:{}", t.host, t.port));
  if (!body.empty()) req.set(http::field::content_type, "application/json");
  req.keep_alive(true);
  req.body() = std::move(body);
  req.prepare_payload();
  return req;
}

std::string job_body(Body body, Duration service, std::int64_t timeout_ms) {
  const auto ms = std::llround(std::chrono::duration<double, std::milli>{service}.count());
  return fmt::format(R"({{"kind":"{}","args":{{"ms":{}}},"timeout_ms":{}}})", to_string(body), ms,
                     std::max<std::int64_t>(timeout_ms, 0));
}

struct Answer {
  std::string state;
  std::string reason;
  Duration run_time{};
};

Answer read_answer(const Response& r) {
  Answer a;
  boost::system::error_code ec;
  const boost::json::value v = boost::json::parse(r.body(), ec);
  if (ec || !v.is_object()) return a;
  const auto& o = v.as_object();
  if (const auto* s = o.if_contains("state"); s && s->is_string()) a.state = s->as_string().c_str();
  if (const auto* s = o.if_contains("reason"); s && s->is_string()) a.reason = s->as_string().c_str();
  if (const auto* t = o.if_contains("timings"); t && t->is_object()) {
    if (const auto* ms = t->as_object().if_contains("run_ms"); ms && ms->is_int64()) {
      a.run_time = std::chrono::milliseconds{ms->as_int64()};
    }
  }
  return a;
}

// Records the fate an answer tells. False when the answer was not one the API gives for jobs.
bool classify(Recorder& rec, std::size_t i, TimePoint now, unsigned status, const Answer& a) {
  const Reason reason = reason_from_string(a.reason).value_or(Reason::ok);
  if (status == 200 && a.state == "completed") {
    rec.completed(i, now, a.run_time);
  } else if (a.state == "cancelled" && reason == Reason::cancelled_while_running) {
    rec.cancelled(i, now, a.run_time);
  } else if ((status == 503 || status == 504) && a.state == "rejected") {
    rec.rejected(i, now, reason);
  } else if (status == 504 && a.state == "expired") {
    rec.expired(i, now, reason);
  } else if (status == 503 && a.state == "cancelled") {  // cancelled in the queue by shutdown
    rec.rejected(i, now, Reason::shutting_down);
  } else {
    rec.failed(i, now, a.run_time);
    return status == 500;
  }
  return true;
}

std::size_t queue_depth_from_metrics(const std::string& text) {
  std::size_t depth = 0;
  std::istringstream lines{text};
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with("sandglass_queue_depth{")) continue;
    const auto space = line.find_last_of(' ');
    double v = 0;
    std::from_chars(line.data() + space + 1, line.data() + line.size(), v);
    depth += static_cast<std::size_t>(std::max(v, 0.0));
  }
  return depth;
}

void note_error(HttpRunStats& s, const std::string& what) {
  if (s.first_error.empty()) s.first_error = what;
}

}  // namespace

std::optional<std::vector<HttpTarget>> parse_http_targets(const std::string& urls) {
  std::vector<HttpTarget> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t end = urls.find(',', start);
    const auto t = parse_http_target(urls.substr(start, end - start));
    if (!t) return std::nullopt;
    out.push_back(*t);
    if (end == std::string::npos) return out;
    start = end + 1;
  }
}

std::optional<HttpTarget> parse_http_target(const std::string& url) {
  constexpr std::string_view kPrefix = "http://127.0.0.1:";
  if (!url.starts_with(kPrefix)) return std::nullopt;
  std::string_view rest = std::string_view{url}.substr(kPrefix.size());
  if (rest.ends_with('/')) rest.remove_suffix(1);
  unsigned port = 0;
  const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), port);
  if (ec != std::errc{} || end != rest.data() + rest.size() || port == 0 || port > 65535) {
    return std::nullopt;
  }
  return HttpTarget{.port = static_cast<unsigned short>(port)};
}

HttpRunStats run_http_arrivals(const HttpTarget& target, const HttpRunOptions& options,
                               Recorder& rec) {
  return run_http_arrivals(std::span<const HttpTarget>{&target, 1}, options, rec);
}

HttpRunStats run_http_arrivals(std::span<const HttpTarget> targets, const HttpRunOptions& options,
                               Recorder& rec) {
  HttpRunStats stats;
  asio::io_context ioc{1};
  // One pool per target, each with its share of the connections; arrival i goes to target
  // i mod N, so the load is spread evenly.
  std::vector<std::unique_ptr<ConnectionPool>> pools;
  for (const HttpTarget& t : targets) {
    pools.push_back(std::make_unique<ConnectionPool>(
        ioc, tcp::endpoint{asio::ip::make_address(t.host), t.port},
        std::max<std::size_t>(1, options.max_connections / targets.size())));
  }
  const std::size_t n = rec.size();
  std::size_t next = 0;
  bool done = false;

  auto finish_if_done = [&] {
    if (!done && next == n && rec.finished() == n) {
      done = true;
      ioc.stop();
    }
  };
  auto on_answer = [&](std::size_t i, beast::error_code ec, Response& r) {
    const TimePoint now = Clock::now();
    if (ec) {
      ++stats.transport_errors;
      note_error(stats, "transport: " + ec.message());
      rec.failed(i, now, Duration::zero());
      return finish_if_done();
    }
    const Answer a = read_answer(r);
    ++stats.answers_by_state[a.state];
    if (!classify(rec, i, now, r.result_int(), a)) {
      ++stats.unexpected_status;
      note_error(stats, fmt::format("HTTP {}: {}", r.result_int(), r.body().substr(0, 200)));
    }
    finish_if_done();
  };
  auto submit = [&](std::size_t i, TimePoint now) {
    rec.submitted(i, now);
    const auto budget_ms = std::chrono::floor<std::chrono::milliseconds>(rec.deadline(i) - now).count();
    const std::size_t t = i % targets.size();
    Request req = make_request(http::verb::post, "/v1/jobs", targets[t],
                               job_body(options.body, rec.arrival(i).service, budget_ms));
    if (!pools[t]->send(std::move(req), [&on_answer, i](beast::error_code ec, Response& r) { on_answer(i, ec, r); })) {
      ++stats.no_free_connection;
      note_error(stats, "no free connection (raise --connections)");
      rec.failed(i, now, Duration::zero());
    }
  };

  // The generator: a timer set to the next arrival; whatever is due is sent at once.
  asio::steady_timer generator{ioc};
  std::function<void()> tick = [&] {
    const TimePoint now = Clock::now();
    while (next < n && rec.scheduled(next) <= now) submit(next++, now);
    if (next < n) {
      generator.expires_at(rec.scheduled(next));
      generator.async_wait([&](beast::error_code ec) { if (!ec) tick(); });
    }
    finish_if_done();
  };

  // The queue depth, from the daemons' own gauges (summed over the targets, each polled on a
  // connection of its own).
  struct MetricsPoll {
    std::shared_ptr<Connection> connection;
    std::size_t depth = 0;
  };
  std::vector<MetricsPoll> polls;
  for (std::size_t t = 0; t < targets.size(); ++t) polls.push_back({std::make_shared<Connection>(ioc)});
  asio::steady_timer poll{ioc};
  std::size_t polls_open = 0;
  std::function<void()> poll_metrics = [&] {
    polls_open = targets.size();
    for (std::size_t t = 0; t < targets.size(); ++t) {
      polls[t].connection->exchange(
          tcp::endpoint{asio::ip::make_address(targets[t].host), targets[t].port},
          make_request(http::verb::get, "/metrics", targets[t], {}),
          [&, t](beast::error_code ec, Response& r) {
            if (!ec) polls[t].depth = queue_depth_from_metrics(r.body());
            if (--polls_open > 0) return;
            std::size_t depth = 0;
            for (const MetricsPoll& m : polls) depth += m.depth;
            stats.peak_queue_depth = std::max(stats.peak_queue_depth, depth);
            poll.expires_after(options.metrics_every);
            poll.async_wait([&](beast::error_code pec) { if (!pec) poll_metrics(); });
          });
    }
  };

  TimePoint last_deadline = rec.start();
  for (std::size_t i = 0; i < n; ++i) last_deadline = std::max(last_deadline, rec.deadline(i));
  asio::steady_timer give_up{ioc};
  give_up.expires_at(last_deadline + 30s);
  give_up.async_wait([&](beast::error_code ec) { if (!ec) ioc.stop(); });

  asio::post(ioc, tick);
  poll_metrics();
  ioc.run();
  for (const auto& pool : pools) stats.connections_opened += pool->opened();
  // Unanswered 30 s after the last deadline: lost.
  const TimePoint now = Clock::now();
  for (std::size_t i = 0; i < n; ++i) {
    if (rec.records()[i].fate == Fate::pending) {
      if (i >= next) rec.submitted(i, now);
      rec.failed(i, now, Duration::zero());
      note_error(stats, "no answer within 30 s after the last deadline");
    }
  }
  return stats;
}

double measure_http_capacity(const HttpTarget& target, Body body, const Distribution& service,
                             std::size_t connections, Duration length, std::uint64_t seed) {
  return measure_http_capacity(std::span<const HttpTarget>{&target, 1}, body, service, connections,
                               length, seed);
}

double measure_http_capacity(std::span<const HttpTarget> targets, Body body,
                             const Distribution& service, std::size_t connections, Duration length,
                             std::uint64_t seed) {
  asio::io_context ioc{1};
  std::mt19937_64 rng{seed};
  const TimePoint start = Clock::now();
  const TimePoint end = start + length;
  std::size_t completed = 0;
  TimePoint last = start;
  std::vector<std::shared_ptr<Connection>> conns;
  // Connection k drives target k mod N.
  std::function<void(std::shared_ptr<Connection>, std::size_t)> loop = [&](std::shared_ptr<Connection> c,
                                                                           std::size_t t) {
    if (Clock::now() >= end) return;
    const HttpTarget& target = targets[t];
    c->exchange(tcp::endpoint{asio::ip::make_address(target.host), target.port},
                make_request(http::verb::post, "/v1/jobs", target, job_body(body, service.sample(rng), 60'000)),
                [&, c, t](beast::error_code ec, Response& r) {
                  if (ec) return;  // this connection stops; the others go on
                  const TimePoint now = Clock::now();
                  if (r.result_int() == 200 && now < end) {
                    ++completed;
                    last = now;
                  }
                  loop(c, t);
                });
  };
  for (std::size_t k = 0; k < connections; ++k) {
    conns.push_back(std::make_shared<Connection>(ioc));
    loop(conns.back(), k % targets.size());
  }
  ioc.run();
  const double seconds = std::chrono::duration<double>{last - start}.count();
  return seconds > 0 ? static_cast<double>(completed) / seconds : 0;
}

std::optional<std::string> http_get(const HttpTarget& target, const std::string& path) {
  asio::io_context ioc{1};
  beast::tcp_stream stream{ioc};
  stream.expires_after(5s);
  beast::error_code ec;
  stream.connect(tcp::endpoint{asio::ip::make_address(target.host), target.port}, ec);
  if (ec) return std::nullopt;
  Request req = make_request(http::verb::get, path, target, {});
  req.keep_alive(false);
  http::write(stream, req, ec);
  if (ec) return std::nullopt;
  beast::flat_buffer buffer;
  Response res;
  http::read(stream, buffer, res, ec);
  if (ec || res.result_int() != 200) return std::nullopt;
  return std::move(res.body());
}

std::optional<int> find_listener_pid(unsigned short port) {
  // /proc/net/tcp: "sl local_address rem_address st ... inode"; listening is state 0A.
  std::ifstream tcp_table{"/proc/net/tcp"};
  std::string line;
  std::getline(tcp_table, line);  // header
  std::string inode;
  const std::string suffix = fmt::format(":{:04X}", port);
  while (std::getline(tcp_table, line)) {
    std::istringstream f{line};
    std::string sl, local, remote, st, queues, timer, retransmits, uid, timeout, node;
    f >> sl >> local >> remote >> st >> queues >> timer >> retransmits >> uid >> timeout >> node;
    if (st == "0A" && local.ends_with(suffix)) {
      inode = node;
      break;
    }
  }
  if (inode.empty()) return std::nullopt;
  const std::string wanted = "socket:[" + inode + "]";
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const auto& proc : fs::directory_iterator{"/proc", ec}) {
    const std::string name = proc.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::error_code fd_ec;
    for (const auto& fd : fs::directory_iterator{proc.path() / "fd", fd_ec}) {
      std::error_code link_ec;
      if (fs::read_symlink(fd.path(), link_ec).string() == wanted) return std::stoi(name);
    }
  }
  return std::nullopt;
}

}  // namespace sandglass::bench
