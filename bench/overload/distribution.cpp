#include "distribution.hpp"

#include <charconv>
#include <cmath>
#include <stdexcept>
#include <vector>

namespace sandglass::bench {
namespace {

using namespace std::chrono_literals;

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  for (std::size_t start = 0;;) {
    const std::size_t end = text.find(sep, start);
    parts.push_back(text.substr(start, end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

double parse_number(std::string_view text, std::string_view what) {
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || !std::isfinite(value)) {
    throw std::invalid_argument{std::string{what} + ": not a number: \"" + std::string{text} + "\""};
  }
  return value;
}

Duration from_ns(double ns) {
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double, std::nano>{ns});
}

}  // namespace

Duration parse_duration(std::string_view text) {
  const std::size_t unit_at = text.find_first_not_of("0123456789.");
  if (unit_at == 0 || unit_at == std::string_view::npos) {
    throw std::invalid_argument{"duration \"" + std::string{text} +
                                "\": expected a number and a unit (ns, us, ms, s, m)"};
  }
  const double value = parse_number(text.substr(0, unit_at), "duration");
  const std::string_view unit = text.substr(unit_at);
  double ns_per_unit = 0;
  if (unit == "ns") ns_per_unit = 1;
  else if (unit == "us") ns_per_unit = 1e3;
  else if (unit == "ms") ns_per_unit = 1e6;
  else if (unit == "s") ns_per_unit = 1e9;
  else if (unit == "m") ns_per_unit = 60e9;
  else throw std::invalid_argument{"duration \"" + std::string{text} + "\": unknown unit \"" +
                                   std::string{unit} + "\" (ns, us, ms, s, m)"};
  if (value * ns_per_unit > 1e18) {
    throw std::invalid_argument{"duration \"" + std::string{text} + "\": too long"};
  }
  return from_ns(value * ns_per_unit);
}

std::string format_duration(Duration d) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
  if (ns != 0 && ns % 1'000'000'000 == 0) return std::to_string(ns / 1'000'000'000) + "s";
  if (ns != 0 && ns % 1'000'000 == 0) return std::to_string(ns / 1'000'000) + "ms";
  if (ns != 0 && ns % 1'000 == 0) return std::to_string(ns / 1'000) + "us";
  return std::to_string(ns) + "ns";
}

Distribution Distribution::parse(std::string_view text) {
  const std::vector<std::string_view> p = split(text, ':');
  auto fail = [&](std::string_view why) -> Distribution {
    throw std::invalid_argument{"distribution \"" + std::string{text} + "\": " + std::string{why} +
                                " (fixed:D, exp:MEAN, lognormal:MEDIAN:SIGMA, uniform:MIN:MAX, "
                                "mix:PART@WEIGHT,...)"};
  };
  if (text.starts_with("mix:")) {
    Distribution mix{Kind::mix, {}, {}, 0};
    double total = 0;
    for (const std::string_view part : split(text.substr(4), ',')) {
      const std::size_t at = part.rfind('@');
      if (at == std::string_view::npos) return fail("each part needs @WEIGHT");
      double weight = 0;
      try {
        weight = parse_number(part.substr(at + 1), "weight");
      } catch (const std::invalid_argument& e) {
        return fail(e.what());
      }
      if (!(weight > 0)) return fail("weights must be positive");
      const std::string_view inner = part.substr(0, at);
      if (inner.starts_with("mix:")) return fail("a mix cannot contain a mix");
      try {
        mix.parts_.push_back(parse(inner));
      } catch (const std::invalid_argument& e) {
        return fail(e.what());
      }
      mix.weights_.push_back(weight);
      total += weight;
    }
    if (mix.parts_.size() < 2) return fail("a mix needs at least two parts");
    for (double& w : mix.weights_) w /= total;
    return mix;
  }
  try {
    if (p.size() == 1) return fixed(parse_duration(p[0]));
    if (p[0] == "fixed" && p.size() == 2) return fixed(parse_duration(p[1]));
    if (p[0] == "exp" && p.size() == 2) {
      const Duration mean = parse_duration(p[1]);
      if (mean <= Duration::zero()) return fail("the mean must be positive");
      return Distribution{Kind::exp, mean, {}, 0};
    }
    if (p[0] == "lognormal" && p.size() == 3) {
      const Duration median = parse_duration(p[1]);
      const double sigma = parse_number(p[2], "sigma");
      if (median <= Duration::zero() || sigma < 0 || sigma > 5) {
        return fail("needs a positive median and a sigma from 0 to 5");
      }
      return Distribution{Kind::lognormal, median, {}, sigma};
    }
    if (p[0] == "uniform" && p.size() == 3) {
      const Duration lo = parse_duration(p[1]);
      const Duration hi = parse_duration(p[2]);
      if (hi < lo) return fail("MAX is below MIN");
      return Distribution{Kind::uniform, lo, hi, 0};
    }
  } catch (const std::invalid_argument& e) {
    return fail(e.what());
  }
  return fail("unknown form");
}

Duration Distribution::sample(std::mt19937_64& rng) const {
  const double a = static_cast<double>(std::chrono::nanoseconds{a_}.count());
  switch (kind_) {
    case Kind::fixed:
      return a_;
    case Kind::exp:
      return from_ns(std::exponential_distribution<double>{1.0 / a}(rng));
    case Kind::lognormal:
      return from_ns(std::lognormal_distribution<double>{std::log(a), sigma_}(rng));
    case Kind::uniform: {
      const double b = static_cast<double>(std::chrono::nanoseconds{b_}.count());
      return from_ns(std::uniform_real_distribution<double>{a, b}(rng));
    }
    case Kind::mix: {
      double u = std::uniform_real_distribution<double>{0.0, 1.0}(rng);
      for (std::size_t i = 0; i + 1 < parts_.size(); ++i) {
        if (u < weights_[i]) return parts_[i].sample(rng);
        u -= weights_[i];
      }
      return parts_.back().sample(rng);
    }
  }
  return a_;
}

Duration Distribution::mean() const {
  switch (kind_) {
    case Kind::fixed:
    case Kind::exp:
      return a_;
    case Kind::lognormal:
      return from_ns(static_cast<double>(std::chrono::nanoseconds{a_}.count()) *
                     std::exp(sigma_ * sigma_ / 2));
    case Kind::uniform:
      return a_ + (b_ - a_) / 2;
    case Kind::mix: {
      double ns = 0;
      for (std::size_t i = 0; i < parts_.size(); ++i) {
        ns += weights_[i] * static_cast<double>(std::chrono::nanoseconds{parts_[i].mean()}.count());
      }
      return from_ns(ns);
    }
  }
  return a_;
}

std::string Distribution::describe() const {
  switch (kind_) {
    case Kind::fixed:
      return "fixed:" + format_duration(a_);
    case Kind::exp:
      return "exp:" + format_duration(a_);
    case Kind::lognormal: {
      char sigma[32];
      const auto [end, ec] = std::to_chars(sigma, sigma + sizeof sigma, sigma_);
      return "lognormal:" + format_duration(a_) + ":" + std::string{sigma, end};
    }
    case Kind::uniform:
      return "uniform:" + format_duration(a_) + ":" + format_duration(b_);
    case Kind::mix: {
      std::string out = "mix:";
      for (std::size_t i = 0; i < parts_.size(); ++i) {
        char weight[32];
        const auto [end, ec] = std::to_chars(weight, weight + sizeof weight, weights_[i]);
        // Appended piece by piece: `"literal" + std::string` trips GCC 12's false -Wrestrict at -O3.
        if (i > 0) out += ',';
        out += parts_[i].describe();
        out += '@';
        out.append(weight, end);
      }
      return out;
    }
  }
  return {};
}

}  // namespace sandglass::bench
