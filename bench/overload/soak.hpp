// soak.hpp — the soak mode of sandglass-overload: a long overload of one sandglassd over HTTP
// that watches the daemon's resident memory and file descriptors, then a SIGTERM in the middle
// of the overload that checks every accepted job got exactly one answer.
//
//   sandglass-overload --soak 60s --sandglassd ./build-cc/daemon/sandglassd --json soak.json
//   sandglass-overload --soak 60s --target http://127.0.0.1:8080 --workers 4   # attach: no SIGTERM
//
// 1. Start sandglassd (--workers, --capacity, --drain-timeout-ms) or find the one at --target.
// 2. Measure its capacity (closed loop, as the HTTP mode does); sample VmRSS and the count of
//    /proc/PID/fd every second from here on; fds "start" is the idle count after this.
// 3. Offer --load (10) x capacity for --soak, open loop. RSS "start" is the first sample after
//    --soak-warm-up, "peak" the largest and "end" the last sample of the soak; fds "peak" the
//    largest; fds "end" the idle count once the client closed its connections.
// 4. With --sandglassd: the same overload for --sigterm-phase, SIGTERM at its middle. The
//    answers the client got, by state, must equal the jobs the daemon's drain summary counts
//    (minus what /metrics counted before the phase); the daemon must exit with code 0 within
//    drain timeout + server.write_timeout_ms (10 s: how long it waits for answers to be
//    taken) + 5 s.
//
// Fails (exit code 1) when fds end above start, when peak or end RSS exceed start by more than
// --max-rss-growth-mib, when an arrival lacks a fate, or when step 4 does not hold. Prints a
// table; --json FILE writes the figures.
//
// Thread safety: call from one thread.
#pragma once

#include "options.hpp"

namespace sandglass::bench {

// The process's exit code: 0 when every check held, 1 when one failed or the daemon could not
// be driven, 2 for a bad --target.
int run_soak(const Options& options);

}  // namespace sandglass::bench
