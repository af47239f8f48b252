// in_process.hpp — the in-process bench: measures capacity, then runs every policy at every
// load point (policies interleaved per point, each on a fresh pool after the same warm-up),
// then the spike if asked, and reports.
//
//   return run_in_process(parse_options(argc, argv));   // Blocks for the whole bench
//
// Thread safety: call from one thread.
#pragma once

#include "options.hpp"

namespace sandglass::bench {

// The process's exit code: 0, or 1 when a point lost jobs or a file could not be written.
int run_in_process(const Options& options);

}  // namespace sandglass::bench
