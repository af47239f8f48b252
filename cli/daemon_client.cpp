#include "cli/daemon_client.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <chrono>

namespace sandglass::cli {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

constexpr std::chrono::seconds kConnectTimeout{5};
constexpr std::chrono::seconds kShortAnswerTimeout{60};
// The daemon keeps records' results up to records.max_bytes in all; one answer stays below this.
constexpr std::uint64_t kMostBodyBytes = 1ULL << 30;

}  // namespace

DaemonReply DaemonClient::request(std::string_view method, std::string_view target,
                                  std::string_view body, Wait wait) const {
  asio::io_context io;
  beast::tcp_stream stream{io};
  const std::string where = "sandglassd at " + url_.text;
  beast::error_code ec;
  asio::ip::tcp::resolver resolver{io};
  const auto endpoints = resolver.resolve(url_.host, url_.port, ec);
  if (ec) throw Unreachable{"cannot resolve " + where + ": " + ec.message()};
  stream.expires_after(kConnectTimeout);
  stream.connect(endpoints, ec);
  if (ec) throw Unreachable{"cannot reach " + where + ": " + ec.message()};

  http::request<http::string_body> req{http::string_to_verb(method), target, 11};
  req.set(http::field::host, url_.host + ":" + url_.port);
  req.set(http::field::user_agent, "sandglass");
  req.keep_alive(false);
  if (!token_.empty()) req.set(http::field::authorization, "Bearer " + token_);
  if (!body.empty()) {
    req.set(http::field::content_type, "application/json");
    req.body() = std::string{body};
  }
  req.prepare_payload();

  if (wait == Wait::short_answer) {
    stream.expires_after(kShortAnswerTimeout);
  } else {
    stream.expires_never();
  }
  http::write(stream, req, ec);
  if (ec) throw Unreachable{"lost the connection to " + where + " while sending: " + ec.message()};
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(kMostBodyBytes);
  http::read(stream, buffer, parser, ec);
  if (ec) throw Unreachable{"no answer from " + where + ": " + ec.message()};
  beast::error_code ignored;
  stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  return {.status = parser.get().result_int(), .body = std::move(parser.get().body())};
}

}  // namespace sandglass::cli
