#include "daemon/http/http_parse.hpp"

// GCC 12 with -fsanitize=address reports a boost::optional in Beast's basic_parser::put as maybe
// used uninitialized when the synchronous read below instantiates it: a false positive inside
// Boost's headers, which are included after this line.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "daemon/http/http_request_parser.hpp"

#include "daemon/api/api.hpp"
#include "daemon/http/http_status.hpp"

#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>
#include <cctype>
#include <string>
#include <utility>

namespace sandglass::daemon {

namespace http = boost::beast::http;
using boost::system::error_code;

std::size_t read_buffer_bytes(const ServerLimits& limits, std::size_t read_chunk) noexcept {
  return limits.max_header_bytes + limits.max_body_bytes + read_chunk;
}

void apply_limits(RequestParser& parser, const ServerLimits& limits) {
  parser.header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
  parser.body_limit(limits.max_body_bytes);
}

std::optional<HttpResponse> check_header(const RequestParser& parser) {
  // Beast reads a request whose Transfer-Encoding does not end in chunked as one without a
  // body, and would then read that body as the next request: a way to smuggle a request past
  // a proxy that reads it otherwise. RFC 9112, section 6.3: answer 400 and close.
  if (parser.get().count(http::field::transfer_encoding) > 0 && !parser.chunked()) {
    return error_response(kStatusBadRequest, "Transfer-Encoding must end in chunked", "request");
  }
  return std::nullopt;
}

bool expects_continue(const RequestParser& parser) {
  return boost::beast::iequals(parser.get()[http::field::expect], "100-continue");
}

std::size_t body_bytes_to_read(const RequestParser& parser, const ServerLimits& limits) {
  if (parser.is_done()) return 0;
  if (const auto length = parser.content_length()) {
    return static_cast<std::size_t>(std::min<std::uint64_t>(*length, limits.max_body_bytes));
  }
  return parser.chunked() ? limits.max_body_bytes : 0;
}

std::optional<HttpResponse> answer_to_read_error(const error_code& ec) {
  if (ec == http::error::body_limit) {
    return error_response(kStatusPayloadTooLarge, "request body is larger than the limit", "body");
  }
  if (ec == http::error::buffer_overflow) {  // see read_buffer_bytes
    return error_response(kStatusBadRequest,
                          "request framing (a chunk header or trailer) is too long", "request");
  }
  if (ec == http::error::header_limit) {
    return error_response(kStatusHeadersTooLarge, "request header section is larger than the limit",
                          "headers");
  }
  if (ec.category() != http::make_error_code(http::error::bad_target).category() ||
      ec == http::error::end_of_stream || ec == http::error::partial_message) {
    return std::nullopt;
  }
  return error_response(kStatusBadRequest, "malformed HTTP request: " + ec.message(), "request");
}

namespace {

std::string lower(std::string_view s) {
  std::string out{s};
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

constexpr std::size_t kReadChunk = 4096;

// A SyncReadStream over bytes in memory: reads of at most kReadChunk bytes, then end of file.
class BytesStream {
 public:
  explicit BytesStream(std::string_view bytes) : rest_{bytes} {}

  template <typename MutableBufferSequence>
  std::size_t read_some(const MutableBufferSequence& buffers, error_code& ec) {
    if (rest_.empty()) {
      ec = boost::asio::error::eof;
      return 0;
    }
    ec = {};
    const std::size_t n = boost::asio::buffer_copy(
        buffers, boost::asio::buffer(rest_.data(), std::min(rest_.size(), kReadChunk)));
    rest_.remove_prefix(n);
    return n;
  }
  template <typename MutableBufferSequence>
  std::size_t read_some(const MutableBufferSequence& buffers) {
    error_code ec;
    const std::size_t n = read_some(buffers, ec);
    if (ec) throw boost::system::system_error{ec};
    return n;
  }

  std::size_t unread() const noexcept { return rest_.size(); }

 private:
  std::string_view rest_;
};

HttpParse answer_and_close(HttpResponse answer) {
  HttpParse out;
  out.status = HttpParse::Status::answer_and_close;
  out.answer = std::move(answer);
  return out;
}

HttpParse read_error(const error_code& ec) {
  if (auto answer = answer_to_read_error(ec)) return answer_and_close(std::move(*answer));
  return {};
}

}  // namespace

HttpRequest head_of(const BeastRequest& request, TimePoint arrived_at) {
  HttpRequest out{.method = std::string{request.method_string()},
                  .target = std::string{request.target()},
                  .arrived_at = arrived_at};
  for (const auto& field : request) {
    out.headers.emplace_back(lower(field.name_string()), std::string{field.value()});
  }
  return out;
}

HttpRequest to_plain(BeastRequest&& request) {
  HttpRequest out{.method = std::string{request.method_string()},
                  .target = std::string{request.target()}};
  for (const auto& field : request) {
    out.headers.emplace_back(lower(field.name_string()), std::string{field.value()});
  }
  out.body = std::move(request.body());
  return out;
}

HttpParse parse_http_request(std::string_view bytes, const ServerLimits& limits) {
  BytesStream stream{bytes};
  boost::beast::flat_buffer buffer{read_buffer_bytes(limits, kReadChunk)};
  RequestParser parser;
  apply_limits(parser, limits);

  error_code ec;
  http::read_header(stream, buffer, parser, ec);
  if (ec) return read_error(ec);
  if (auto answer = check_header(parser)) return answer_and_close(std::move(*answer));
  HttpParse out;
  out.expect_continue = expects_continue(parser);
  http::read(stream, buffer, parser, ec);
  if (ec) return read_error(ec);

  out.status = HttpParse::Status::request;
  BeastRequest request = parser.release();
  out.keep_alive = request.keep_alive();
  out.request = to_plain(std::move(request));
  out.consumed = bytes.size() - stream.unread() - buffer.size();
  return out;
}

}  // namespace sandglass::daemon
