// http_parse.hpp (private) — `parse_http_request`, one request read from bytes in memory exactly
// as the server reads it from a socket: the same Beast parser, limits, checks and answers to
// bad input (http_request_parser.hpp holds the pieces both use). Beast stays out of this header.
//
//   HttpParse p = parse_http_request(bytes, config.limits);
//   if (p.status == HttpParse::Status::request) api.handle(p.request, respond);
//   // next pipelined request: bytes.substr(p.consumed), if p.keep_alive
//
// The bytes are read in chunks of at most 4096, as the server's socket reads may arrive. A
// request with `Expect: 100-continue` is read on as if the server had sent its interim answer.
//
// Thread safety: a pure function.
#pragma once

#include "daemon/http/http_message.hpp"

#include <sandglass/daemon/daemon_config.hpp>

#include <cstddef>
#include <string_view>

namespace sandglass::daemon {

struct HttpParse {
  enum class Status {
    request,           // a whole request: `request`, `keep_alive`, `consumed`
    answer_and_close,  // bad input: the server writes `answer` and closes the connection
    incomplete,        // the bytes end before the request does: the server closes silently
  };
  Status status = Status::incomplete;
  HttpRequest request;
  bool keep_alive = false;       // the connection stays open for another request
  bool expect_continue = false;  // the server answers "100 Continue" before reading the body
  HttpResponse answer;
  std::size_t consumed = 0;  // bytes the request took; the rest belongs to the next one
};

HttpParse parse_http_request(std::string_view bytes, const ServerLimits& limits);

}  // namespace sandglass::daemon
