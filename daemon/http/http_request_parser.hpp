// http_request_parser.hpp (private, Beast) — how the daemon reads one HTTP request: the parser
// and its limits, the checks after the header section, the answers to read errors, and the
// conversion to a plain `HttpRequest`. The server (http_server.cpp) drives these over a socket,
// parse_http_request (http_parse.hpp) over bytes in memory; include this only where Beast is
// already needed.
//
// Thread safety: pure functions; a parser belongs to one reader.
#pragma once

#include "daemon/http/http_message.hpp"

#include <sandglass/daemon/daemon_config.hpp>

#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/system/error_code.hpp>

#include <cstddef>
#include <optional>

namespace sandglass::daemon {

using BeastRequest = boost::beast::http::request<boost::beast::http::string_body>;
using RequestParser = boost::beast::http::request_parser<boost::beast::http::string_body>;

// The most bytes read and not yet parsed. The parser's limits cover the header section and the
// body, but not a chunk header or a trailer, which it buffers whole until their line ends;
// unbounded, one client could grow the buffer until read_timeout. The bound leaves room for a
// pipelined request read ahead (max_header + max_body) and one more read of `read_chunk` bytes.
// A request that fills it is answered 400 (http::error::buffer_overflow).
std::size_t read_buffer_bytes(const ServerLimits& limits, std::size_t read_chunk) noexcept;

// Sets the header section and body limits on a fresh parser.
void apply_limits(RequestParser& parser, const ServerLimits& limits);

// Checks the header section once it is read: an answer means reply with it and close.
std::optional<HttpResponse> check_header(const RequestParser& parser);
// Whether the client waits for "100 Continue" before it sends the body.
bool expects_continue(const RequestParser& parser);

// The most body bytes the request, whose header section `parser` has read, may still buffer:
// its Content-Length, or max_body_bytes for a chunked body; 0 without a body.
std::size_t body_bytes_to_read(const RequestParser& parser, const ServerLimits& limits);

// The answer to a read error, after which the connection closes; nullopt when there is no one
// to answer (the client went away, was silent or too slow, or the socket failed).
std::optional<HttpResponse> answer_to_read_error(const boost::system::error_code& ec);

// The request as plain values, header names in lower case.
HttpRequest to_plain(BeastRequest&& request);
// Its method, target and headers only (what is known once the header section is read), with
// the time its first byte was read.
HttpRequest head_of(const BeastRequest& request, TimePoint arrived_at);

}  // namespace sandglass::daemon
