// distribution.hpp — durations as text ("250us", "2ms", "1.5s") and `Distribution`, a random
// duration: `fixed:D`, `exp:MEAN`, `lognormal:MEDIAN:SIGMA` or `uniform:MIN:MAX` (a bare
// duration means `fixed:D`), or a weighted mix of those: `mix:10ms@0.5,1s@0.5` draws 10 ms
// or 1 s with even odds (`mix:PART@WEIGHT,...`; weights are relative, any positive numbers).
//
//   Distribution service = Distribution::parse("lognormal:2ms:0.5");
//   std::mt19937_64 rng{1};
//   Duration d = service.sample(rng);       // never negative
//
// Thread safety: a value type; `sample` uses only the generator it is given.
#pragma once

#include <sandglass/deadline.hpp>

#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace sandglass::bench {

// "250us", "2ms", "1.5s", "100ns", "1m" (minutes). Throws std::invalid_argument naming the text.
Duration parse_duration(std::string_view text);
// The shortest exact spelling with the largest unit: 2000000ns -> "2ms".
std::string format_duration(Duration d);

class Distribution {
 public:
  enum class Kind { fixed, exp, lognormal, uniform, mix };

  Distribution() = default;
  static Distribution fixed(Duration d) { return Distribution{Kind::fixed, d, d, 0}; }
  // Throws std::invalid_argument with a message that names the text.
  static Distribution parse(std::string_view text);

  Duration sample(std::mt19937_64& rng) const;
  Duration mean() const;
  Kind kind() const noexcept { return kind_; }
  // The text `parse` accepts for this distribution, e.g. "exp:2ms".
  std::string describe() const;

 private:
  Distribution(Kind kind, Duration a, Duration b, double sigma)
      : kind_{kind}, a_{a}, b_{b}, sigma_{sigma} {}

  Kind kind_ = Kind::fixed;
  Duration a_{};       // fixed: value; exp: mean; lognormal: median; uniform: min
  Duration b_{};       // uniform: max
  double sigma_ = 0;   // lognormal: sigma of the underlying normal
  std::vector<Distribution> parts_;  // mix: the parts
  std::vector<double> weights_;      // mix: each part's weight, summing to 1
};

}  // namespace sandglass::bench
