#include "daemon/http/http_server.hpp"

#include "daemon/http/http_request_parser.hpp"
#include "daemon/http/http_status.hpp"
#include "daemon/api/job_request.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <list>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

namespace sandglass::daemon {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;

constexpr std::size_t kReadChunk = 4096;
// How long accepting pauses after it failed for want of descriptors or memory.
constexpr std::chrono::milliseconds kAcceptPause{100};
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
// How long a connection that closes after an answer keeps reading (and dropping) what the
// client still sends, after it shut down its own side. Closing a socket with unread bytes makes
// the kernel send a reset, and a reset can make the client's kernel drop our answer before the
// client read it (RFC 9112, section 9.6). Bounded: a client that goes on sending loses the rest.
constexpr std::chrono::seconds kLingerTime{2};

class Session;

}  // namespace

class HttpServer::Impl {
 public:
  Impl(const ServerLimits& limits, std::size_t io_threads, Api& api, DaemonMetrics& metrics)
      : limits_{limits}, io_threads_{std::max<std::size_t>(1, io_threads)}, api_{api}, metrics_{metrics} {}

  void start(const std::string& host, std::uint16_t port);
  void stop_accepting();
  bool wait_answered_until(TimePoint deadline);
  void stop();

  // Counts `bytes` of a body about to be read against max_pending_body_bytes: false (and
  // nothing counted) when they do not fit beside the bodies being read already.
  bool reserve_body_bytes(std::size_t bytes) {
    std::size_t now = pending_body_bytes_.load(std::memory_order_relaxed);
    do {
      if (bytes > limits_.max_pending_body_bytes - std::min(now, limits_.max_pending_body_bytes)) {
        return false;
      }
    } while (!pending_body_bytes_.compare_exchange_weak(now, now + bytes, std::memory_order_relaxed));
    return true;
  }
  void release_body_bytes(std::size_t bytes) {
    pending_body_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
  }

  // A connection owes an answer from its start until it closes or lingers after its last one.
  void owing_added() { owing_.fetch_add(1, std::memory_order_relaxed); }
  void owing_done();

  using SessionList = std::list<std::weak_ptr<Session>>;
  SessionList::iterator add_session(std::weak_ptr<Session> session);
  void remove_session(SessionList::iterator it);

  const ServerLimits limits_;
  const std::size_t io_threads_;
  Api& api_;
  DaemonMetrics& metrics_;
  std::atomic<std::size_t> connections_{0};
  std::atomic<bool> stopping_{false};  // answers close their connection
  std::atomic<std::uint16_t> port_{0};
  std::atomic<std::size_t> owing_{0};  // connections that owe an answer (not lingering)
  // Body bytes that requests being read may still buffer, all connections together (a count
  // only: relaxed).
  std::atomic<std::size_t> pending_body_bytes_{0};
  std::mutex owing_mu_;                // with owing_cv_: wait_answered_until sleeps on it
  std::condition_variable owing_cv_;
  std::mutex sessions_mu_;
  SessionList sessions_;  // guarded by sessions_mu_; stop_accepting closes the idle ones
  // Declared after what sessions touch when they are destroyed with the io_context.
  asio::io_context ioc_;
  tcp::acceptor acceptor_{asio::make_strand(ioc_)};
  asio::steady_timer accept_pause_{acceptor_.get_executor()};
  std::vector<std::thread> threads_;

 private:
  void accept();

  bool accept_failing_ = false;  // on the acceptor's strand only
};

namespace {

// One connection. Every member is touched only on the connection's strand.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket&& socket, HttpServer::Impl& server)
      : stream_{std::move(socket)},
        server_{server},
        buffer_{read_buffer_bytes(server.limits_, kReadChunk)} {
    server_.connections_.fetch_add(1, std::memory_order_relaxed);
    server_.owing_added();
  }
  ~Session() {
    server_.release_body_bytes(std::exchange(body_reserved_, 0));
    if (registered_) server_.remove_session(*registered_);
    if (!lingering_) server_.owing_done();
    server_.connections_.fetch_sub(1, std::memory_order_relaxed);
  }

  void start() {
    registered_ = server_.add_session(weak_from_this());
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read_request(); });
  }

  // For a drain: a connection between requests closes now; one in a request closes once its
  // answer is written (answers carry Connection: close once the server stops accepting). The
  // idle read is cancelled, not the socket closed: if bytes arrived just before, its handler
  // is already queued and reads that request, which is answered.
  void close_if_idle() {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] {
      error_code ignored;
      if (self->idle_) self->stream_.socket().cancel(ignored);
    });
  }

 private:
  using Response = http::response<http::string_body>;

  void read_request() {
    parser_.emplace();
    apply_limits(*parser_, server_.limits_);
    head_ = {};
    budget_spent_at_.reset();
    if (buffer_.size() > 0) {
      arrived_at_ = Clock::now();  // a pipelined request: read ahead, it arrives now
      read_header();
      return;
    }
    if (server_.stopping_.load(std::memory_order_relaxed)) return close();
    // Idle: wait for the first bytes of the next request, at most idle_timeout.
    idle_ = true;
    stream_.expires_after(server_.limits_.idle_timeout);
    stream_.async_read_some(buffer_.prepare(kReadChunk),
                            [self = shared_from_this()](error_code ec, std::size_t n) {
                              self->arrived_at_ = Clock::now();  // the request's first bytes
                              self->idle_ = false;
                              self->buffer_.commit(n);
                              if (ec) return self->close();
                              self->read_header();
                            });
  }

  void read_header() {
    // The whole request must arrive within read_timeout of its first byte.
    stream_.expires_at(saturating_add(arrived_at_, server_.limits_.read_timeout));
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](error_code ec, std::size_t) {
                              self->on_header(ec);
                            });
  }

  void on_header(error_code ec) {
    if (ec) return on_read_error(ec);
    if (auto answer = check_header(*parser_)) return answer_and_close(std::move(*answer));
    // The token and the budget are checked before the body is read: a 401, or a 504 for a job
    // request whose budget was spent in our buffers, closes the connection.
    head_ = head_of(parser_->get(), arrived_at_);
    Api::Intake intake = server_.api_.intake(head_, Clock::now());
    if (intake.answer) return answer_head_and_close(std::move(*intake.answer));
    budget_spent_at_ = intake.budget_spent_at;
    // Bodies buffered at once are bounded in total, whatever each connection may send.
    const std::size_t body_bytes = body_bytes_to_read(*parser_, server_.limits_);
    if (body_bytes > 0) {
      if (!server_.reserve_body_bytes(body_bytes)) {
        HttpResponse busy = error_response(
            kStatusServiceUnavailable,
            "too many request bodies are being read at once (server.max_pending_body_bytes)", "body");
        busy.headers.emplace_back("Retry-After", "1");
        return answer_head_and_close(std::move(busy));
      }
      body_reserved_ = body_bytes;
    }
    if (expects_continue(*parser_)) {
      asio::async_write(stream_, asio::buffer(kContinue.data(), kContinue.size()),
                        [self = shared_from_this()](error_code wec, std::size_t) {
                          if (wec) return self->close();
                          self->read_body();
                        });
      return;
    }
    read_body();
  }

  void read_body() {
    // A job request whose budget runs out before its body is read is answered then: the timer
    // cancels the read (a stream timeout would close the socket, and the answer with it).
    if (budget_spent_at_) {
      budget_timer_.expires_at(*budget_spent_at_);
      budget_timer_.async_wait([self = shared_from_this()](error_code ec) {
        if (ec || !self->reading_body_) return;
        self->budget_spent_ = true;
        error_code ignored;
        self->stream_.socket().cancel(ignored);
      });
    }
    reading_body_ = true;
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](error_code ec, std::size_t) {
                       self->reading_body_ = false;
                       self->server_.release_body_bytes(std::exchange(self->body_reserved_, 0));
                       self->budget_timer_.cancel();
                       self->on_request(ec);
                     });
  }

  void on_read_error(error_code ec) {
    if (budget_spent_) {
      budget_spent_ = false;
      if (auto answer = server_.api_.intake(head_, Clock::now()).answer) {
        return answer_head_and_close(std::move(*answer));
      }
      return close();
    }
    if (auto answer = answer_to_read_error(ec)) return answer_and_close(std::move(*answer));
    close();
  }

  void on_request(error_code ec) {
    if (ec) return on_read_error(ec);
    BeastRequest req = parser_->release();
    log_request_line(req);
    keep_alive_ = req.keep_alive();
    answered_ = false;
    HttpRequest request = to_plain(std::move(req));
    request.arrived_at = arrived_at_;
    auto self = shared_from_this();
    // May run on a worker thread, or right here: either way the answer is written on the strand.
    auto respond = [self](HttpResponse r) {
      asio::post(self->stream_.get_executor(),
                 [self, r = std::move(r)]() mutable { self->write_answer(std::move(r)); });
    };
    client_gone_ = server_.api_.handle(request, std::move(respond));
    if (client_gone_) watch_for_disconnect();
  }

  // While the job runs, a read tells us when the client goes away. Bytes that arrive (a
  // pipelined request) are kept for the next read.
  void watch_for_disconnect() {
    if (buffer_.size() >= server_.limits_.max_header_bytes + server_.limits_.max_body_bytes) return;
    watching_ = true;
    stream_.expires_never();
    stream_.socket().async_read_some(
        buffer_.prepare(kReadChunk), [self = shared_from_this()](error_code ec, std::size_t n) {
          self->watching_ = false;
          self->buffer_.commit(n);
          if (!ec && !self->answered_) return self->watch_for_disconnect();
          if (ec && ec != asio::error::operation_aborted) {
            self->peer_gone_ = true;
            if (!self->answered_ && self->client_gone_) {
              self->client_gone_();  // its answer still comes; writing it fails
              self->client_gone_ = {};
            }
          }
          if (self->answered_ && self->write_done_) self->after_write();
        });
  }

  // At debug level, each answer is logged with its method and path (never the query, headers
  // or body, which may carry secrets).
  void log_request_line(const BeastRequest& req) {
    request_line_.clear();
    if (!spdlog::should_log(spdlog::level::debug)) return;
    request_line_ = std::string{req.method_string()} + " " +
                    std::string{split_target(req.target()).path};
  }

  void write_answer(HttpResponse r) {
    if (spdlog::should_log(spdlog::level::debug)) {
      spdlog::debug("{} -> {}", request_line_.empty() ? "refused request" : request_line_, r.status);
    }
    answered_ = true;
    write_done_ = false;
    client_gone_ = {};
    if (watching_) {
      error_code ignored;
      stream_.socket().cancel(ignored);  // the watch ends; after_write waits for it
    }
    server_.metrics_.http_response(r.status);
    response_.emplace(static_cast<http::status>(r.status), 11);
    if (r.status == kStatusClientClosedRequest) response_->reason("Client Closed Request");
    response_->set(http::field::content_type, r.content_type);
    for (auto& [name, value] : r.headers) response_->set(name, value);
    response_->keep_alive(keep_alive_ && !close_after_write_ &&
                          !server_.stopping_.load(std::memory_order_relaxed));
    response_->body() = std::move(r.body);
    response_->prepare_payload();
    stream_.expires_after(server_.limits_.write_timeout);
    http::async_write(stream_, *response_, [self = shared_from_this()](error_code ec, std::size_t) {
      self->write_done_ = true;
      if (ec) self->peer_gone_ = true;
      if (!self->watching_) self->after_write();
    });
  }

  void after_write() {
    if (peer_gone_) return close();
    if (!response_->keep_alive()) return linger_then_close();
    response_.reset();
    read_request();
  }

  // For errors found while reading: one answer, then the connection closes.
  void answer_and_close(HttpResponse r) {
    request_line_.clear();  // the request was not read whole
    close_after_write_ = true;
    write_answer(std::move(r));
  }

  // The same for an answer decided by the header section (Api::intake): the debug log names
  // the request's method and path.
  void answer_head_and_close(HttpResponse r) {
    log_request_line(parser_->get());
    close_after_write_ = true;
    write_answer(std::move(r));
  }

  void close() {
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
  }

  // After the last answer: shut down our side (the client reads the answer, then end of file),
  // then read and drop what the client still sends until it closes its side or kLingerTime
  // passes; then close. A drain does not wait for lingering connections (their answers are
  // written), and stop() ends them.
  void linger_then_close() {
    error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    if (ec) return close();
    lingering_ = true;
    server_.owing_done();
    stream_.expires_after(kLingerTime);
    buffer_.consume(buffer_.size());
    drop_rest();
  }

  void drop_rest() {
    stream_.async_read_some(buffer_.prepare(kReadChunk),
                            [self = shared_from_this()](error_code ec, std::size_t) {
                              if (ec) return self->close();  // end of file, timeout or error
                              self->drop_rest();
                            });
  }

  beast::tcp_stream stream_;
  HttpServer::Impl& server_;
  // Bytes read and not yet parsed, bounded by read_buffer_bytes (which says why); the bound
  // leaves room for the pipelined request watch_for_disconnect may read ahead.
  beast::flat_buffer buffer_;
  std::optional<RequestParser> parser_;
  TimePoint arrived_at_{};  // when the current request's first bytes were read
  HttpRequest head_;        // its method, target and headers, once read
  std::optional<TimePoint> budget_spent_at_;  // a job request: when its budget is spent
  asio::steady_timer budget_timer_{stream_.get_executor()};  // fires at budget_spent_at_
  bool reading_body_ = false;
  std::size_t body_reserved_ = 0;  // counted in the server's pending body bytes until read
  bool budget_spent_ = false;  // the timer cancelled the body's read
  std::optional<Response> response_;
  Api::ClientGone client_gone_;  // tells the API when the client leaves while it waits
  std::string request_line_;     // "METHOD /path" for the debug log; empty below debug level
  bool keep_alive_ = false;
  bool answered_ = true;
  bool watching_ = false;
  bool write_done_ = false;
  bool peer_gone_ = false;
  bool close_after_write_ = false;
  bool idle_ = false;  // waiting for the first byte of a request
  bool lingering_ = false;  // answered for the last time; dropping what the client still sends
  std::optional<HttpServer::Impl::SessionList::iterator> registered_;
};

}  // namespace

void HttpServer::Impl::start(const std::string& host, std::uint16_t port) {
  error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  if (ec) throw boost::system::system_error{ec, "listen address \"" + host + "\""};
  const tcp::endpoint endpoint{address, port};
  acceptor_.open(endpoint.protocol());
  acceptor_.set_option(asio::socket_base::reuse_address(true));
  acceptor_.bind(endpoint, ec);
  if (ec) throw boost::system::system_error{ec, "bind " + host + ":" + std::to_string(port)};
  acceptor_.listen(asio::socket_base::max_listen_connections);
  port_.store(acceptor_.local_endpoint().port(), std::memory_order_relaxed);
  asio::post(acceptor_.get_executor(), [this] { accept(); });
  for (std::size_t i = 0; i < io_threads_; ++i) threads_.emplace_back([this] { ioc_.run(); });
}

void HttpServer::Impl::accept() {
  acceptor_.async_accept(asio::make_strand(ioc_), [this](error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (ec && ec != asio::error::connection_aborted) {
      // Out of file descriptors or memory. The connection stays queued, so accepting again at
      // once fails again: retrying at once would spin a core and flood the log. Pause instead,
      // and say so once for each run of failures.
      if (!accept_failing_) {
        spdlog::warn("accept failed: {}; retrying every {} ms", ec.message(), kAcceptPause.count());
      }
      accept_failing_ = true;
      accept_pause_.expires_after(kAcceptPause);
      accept_pause_.async_wait([this](error_code wait_ec) {
        if (!wait_ec) accept();  // cancelled by stop_accepting
      });
      return;
    }
    if (accept_failing_ && !ec) {
      spdlog::info("accepting connections again");
      accept_failing_ = false;
    }
    if (!ec) {
      if (connections_.load(std::memory_order_relaxed) >= limits_.max_connections) {
        spdlog::warn("connection limit {} reached: closing a new connection", limits_.max_connections);
        socket.close(ec);
      } else {
        std::make_shared<Session>(std::move(socket), *this)->start();
      }
    }
    accept();
  });
}

void HttpServer::Impl::stop_accepting() {
  stopping_.store(true, std::memory_order_relaxed);
  asio::post(acceptor_.get_executor(), [this] {
    error_code ignored;
    acceptor_.close(ignored);
    accept_pause_.cancel();
  });
  std::vector<std::shared_ptr<Session>> live;
  {
    const std::lock_guard lock{sessions_mu_};
    for (const auto& weak : sessions_) {
      if (auto session = weak.lock()) live.push_back(std::move(session));
    }
  }
  // Outside the lock: a session released here may be destroyed here and unregister itself.
  for (auto& session : live) session->close_if_idle();
}

HttpServer::Impl::SessionList::iterator HttpServer::Impl::add_session(std::weak_ptr<Session> session) {
  const std::lock_guard lock{sessions_mu_};
  return sessions_.insert(sessions_.end(), std::move(session));
}

void HttpServer::Impl::remove_session(SessionList::iterator it) {
  const std::lock_guard lock{sessions_mu_};
  sessions_.erase(it);
}

void HttpServer::Impl::owing_done() {
  // The last connection that owed an answer wakes the drain. The lock orders the notification
  // after the waiter's check of the count (else it could miss it and sleep to its deadline).
  if (owing_.fetch_sub(1, std::memory_order_relaxed) == 1) {
    const std::lock_guard lock{owing_mu_};
    owing_cv_.notify_all();
  }
}

bool HttpServer::Impl::wait_answered_until(TimePoint deadline) {
  std::unique_lock lock{owing_mu_};
  return owing_cv_.wait_until(lock, deadline,
                              [this] { return owing_.load(std::memory_order_relaxed) == 0; });
}

void HttpServer::Impl::stop() {
  stop_accepting();
  ioc_.stop();  // connections close when the io_context destroys their handlers
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

HttpServer::HttpServer(const ServerLimits& limits, std::size_t io_threads, Api& api,
                       DaemonMetrics& metrics)
    : impl_{std::make_unique<Impl>(limits, io_threads, api, metrics)} {}
HttpServer::~HttpServer() { stop(); }
void HttpServer::start(const std::string& host, std::uint16_t port) { impl_->start(host, port); }
std::uint16_t HttpServer::port() const noexcept { return impl_->port_.load(std::memory_order_relaxed); }
void HttpServer::stop_accepting() { impl_->stop_accepting(); }
std::size_t HttpServer::connections() const noexcept {
  return impl_->connections_.load(std::memory_order_relaxed);
}
bool HttpServer::wait_answered_until(TimePoint deadline) {
  return impl_->wait_answered_until(deadline);
}
void HttpServer::stop() { impl_->stop(); }

}  // namespace sandglass::daemon
