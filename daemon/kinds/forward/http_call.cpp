#include "daemon/kinds/forward/http_call.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <charconv>

namespace sandglass::daemon {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;

std::optional<Duration> retry_after_of(std::string_view value) {
  std::int64_t seconds = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), seconds);
  if (ec != std::errc{} || end != value.data() + value.size() || seconds < 0) return std::nullopt;
  return std::chrono::seconds{std::min<std::int64_t>(seconds, 86'400)};
}

// One call's state, all touched only on the io_context's (this) thread.
class Call {
 public:
  Call(const HttpCall& call, Deadline deadline) : call_{call}, deadline_{deadline}, stream_{ioc_} {}

  HttpCallResult run(const CancelToken& token) {
    if (token.cancelled()) return cancelled();
    // From another thread: close the socket on this thread's io_context. Runs at most once.
    auto registration = token.on_cancel([this]() noexcept {
      asio::post(ioc_, [this] {
        result_.cancelled = true;
        stream_.socket().close(ignored_);
      });
    });
    stream_.expires_at(deadline_.time_point());
    error_code ec;
    const auto address = asio::ip::make_address(call_.host, ec);
    if (ec) return fail("bad address: " + ec.message());
    stream_.async_connect(tcp::endpoint{address, call_.port}, [this](error_code e) { on_connect(e); });
    ioc_.run();
    registration = {};  // no callback may post to ioc_ after this
    ioc_.restart();
    ioc_.poll();  // a callback that fired meanwhile has posted; let it finish here
    stream_.socket().close(ignored_);
    if (token.cancelled()) result_.cancelled = true;
    return result_;
  }

 private:
  HttpCallResult cancelled() {
    result_.cancelled = true;
    result_.error = "cancelled";
    return result_;
  }
  HttpCallResult fail(std::string error) {
    result_.error = std::move(error);
    return result_;
  }

  void on_connect(error_code ec) {
    if (ec) return stop(ec);
    result_.phase = HttpCallResult::Phase::request;
    request_.method(http::verb::post);
    request_.target(call_.target);
    request_.version(11);
    request_.set(http::field::host, call_.host + ":" + std::to_string(call_.port));
    request_.set(http::field::content_type, "application/json");
    for (const auto& [name, value] : call_.headers) request_.set(name, value);
    request_.body() = call_.body;
    request_.prepare_payload();
    http::async_write(stream_, request_, [this](error_code e, std::size_t) { on_written(e); });
  }

  void on_written(error_code ec) {
    if (ec) return stop(ec);
    result_.phase = HttpCallResult::Phase::response;
    parser_.body_limit(call_.max_response_bytes);
    http::async_read(stream_, buffer_, parser_, [this](error_code e, std::size_t) { on_read(e); });
  }

  void on_read(error_code ec) {
    if (ec) return stop(ec);
    result_.phase = HttpCallResult::Phase::done;
    auto& response = parser_.get();
    result_.status = response.result_int();
    result_.retry_after = retry_after_of(response[http::field::retry_after]);
    result_.body = std::move(response.body());
  }

  void stop(error_code ec) {
    result_.timed_out = ec == beast::error::timeout;
    result_.error = result_.cancelled ? "cancelled" : ec.message();
  }

  const HttpCall& call_;
  const Deadline deadline_;
  asio::io_context ioc_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> request_;
  http::response_parser<http::string_body> parser_;
  HttpCallResult result_;
  error_code ignored_;
};

}  // namespace

std::string_view to_string(HttpCallResult::Phase phase) noexcept {
  switch (phase) {
    case HttpCallResult::Phase::connect: return "connect";
    case HttpCallResult::Phase::request: return "request";
    case HttpCallResult::Phase::response: return "response";
    case HttpCallResult::Phase::done: return "done";
  }
  return "unknown";
}

HttpCallResult http_post(const HttpCall& call, Deadline deadline, const CancelToken& token) {
  Call c{call, deadline};
  return c.run(token);
}

}  // namespace sandglass::daemon
