// commands.hpp — `sandglass`, the command-line client of sandglassd (an HTTP client of its
// jobs API):
//
//   sandglass [--url URL] [--json] submit KIND [--args JSON] [--budget 500ms] [--priority P]
//             [--key K] [--expected-ms N] [--delay 1s] [--retry N] [--wait]
//   sandglass submit-batch FILE      (FILE: {"jobs": [...]} or an array of jobs; "-": stdin)
//   sandglass get ID [--wait]        sandglass cancel ID        sandglass stats
//   sandglass list [--state S] [--kind K] [--limit N] [--cursor C]
//   sandglass watch [--interval 1s] [--count N]
//
// The daemon is --url, else SANDGLASS_URL, else http://127.0.0.1:8080; SANDGLASS_TOKEN, when
// set, is sent as its bearer token. Output is human-readable, or the daemon's JSON as it came
// with --json; errors go to stderr. The exit code says how the job ended (exit_codes.hpp); for
// submit-batch, whether every job was admitted (exit_code_of_batch).
//
// The daemon checks every field itself (one rule in one place): the client only turns flags
// into fields (--budget -> timeout_ms, --key -> idempotency_key, --expected-ms -> expected_ms,
// --delay -> delay_ms, --retry N -> "retry": {"max_attempts": N}) and passes on the daemon's
// 400 with exit code 2.
//
// Thread safety: `run` is the process's main; call it once.
#pragma once

namespace sandglass::cli {

// Parses the command line, runs the command and returns the process's exit code.
int run(int argc, char** argv);

}  // namespace sandglass::cli
