// http_driver.hpp — the HTTP mode: drives a running sandglassd (POST /v1/jobs with sleep or
// spin jobs) open loop over many keep-alive connections, and reports the same figures from
// the answers' status codes, states and timings.
//
//   sandglassd --listen 127.0.0.1:0 --workers 8 --capacity 1024 &
//   sandglass-overload --target http://127.0.0.1:PORT --workers 8
//
// Only this file's implementation includes Beast.
//
// Thread safety: call from one thread.
#pragma once

#include "options.hpp"

namespace sandglass::bench {

// The process's exit code: 0, 1 when the daemon could not be driven.
int run_http(const Options& options);

}  // namespace sandglass::bench
