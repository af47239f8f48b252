#include "hints.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <random>
#include <stdexcept>

namespace sandglass::bench {

Hints Hints::parse(std::string_view text) {
  if (text == "none") return {};
  if (text == "exact") return {.mode = Mode::exact};
  constexpr std::string_view kNoisy = "noisy:";
  if (text.starts_with(kNoisy)) {
    const std::string number{text.substr(kNoisy.size())};
    double sigma = -1;
    const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), sigma);
    if (error == std::errc{} && end == number.data() + number.size() && sigma >= 0 && sigma <= 10) {
      return {.mode = Mode::noisy, .sigma = sigma};
    }
  }
  throw std::invalid_argument{"--hints: expected none, exact or noisy:SIGMA (0 to 10), got \"" +
                              std::string{text} + "\""};
}

std::string Hints::describe() const {
  switch (mode) {
    case Mode::none:
      return "none";
    case Mode::exact:
      return "exact";
    case Mode::noisy:
      break;
  }
  char text[32];
  const auto end = std::to_chars(text, text + sizeof text, sigma).ptr;
  return "noisy:" + std::string(text, end);
}

Duration Hints::of(Duration service, std::uint64_t seed, std::size_t index) const {
  if (mode == Mode::none || service <= Duration::zero()) return Duration::zero();
  if (mode == Mode::exact) return service;
  // One generator per job, from the run's seed and the job's index: the same hint whichever
  // thread asks, and in every run with the same seed.
  std::mt19937_64 rng{seed * 0x9E3779B97F4A7C15ull + index};
  std::normal_distribution<double> normal{0.0, sigma};
  const double said = static_cast<double>(service.count()) * std::exp(normal(rng));
  return Duration{std::max<Duration::rep>(static_cast<Duration::rep>(said), 1)};
}

}  // namespace sandglass::bench
