// hints.hpp — `Hints`: what size a job of the in-process sandglass policy says it has
// (JobSpec::expected), as `--hints` sets it: `none` (no hint), `exact` (its service time) or
// `noisy:SIGMA` (its service time × a lognormal factor of that sigma, median 1: clients know
// their sizes only roughly).
//
//   Hints h = Hints::parse("noisy:0.5");
//   Duration said = h.of(arrival.service, seed, i);   // the same for the same seed and job
//
// Thread safety: a value type.
#pragma once

#include <sandglass/deadline.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sandglass::bench {

struct Hints {
  enum class Mode { none, exact, noisy };
  Mode mode = Mode::none;
  double sigma = 0;  // noisy only

  // Throws std::invalid_argument naming the text.
  static Hints parse(std::string_view text);
  // The text `parse` accepts for these hints.
  std::string describe() const;
  // What job `index` of a run seeded with `seed`, which needs `service`, says it takes (zero:
  // no hint).
  Duration of(Duration service, std::uint64_t seed, std::size_t index) const;
};

}  // namespace sandglass::bench
