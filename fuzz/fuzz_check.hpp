// fuzz_check.hpp — FUZZ_CHECK(condition): an invariant a fuzz target asserts. A violation
// prints the condition and aborts, which libFuzzer (and the replay test) reports as a crash.
// Unlike assert it is never compiled out.
#pragma once

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(condition)                                                            \
  do {                                                                                   \
    if (!(condition)) {                                                                  \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (false)
