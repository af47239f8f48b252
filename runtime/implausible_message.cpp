#include "runtime/implausible_message.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>

namespace sandglass::detail {

void append_duration(std::string& out, Duration d) {
  const std::int64_t ns = std::max<std::int64_t>(std::chrono::nanoseconds{d}.count(), 0);
  std::int64_t per = 1'000;  // ns per unit
  std::string_view unit = "us";
  if (ns >= 1'000'000'000) {
    per = 1'000'000'000;
    unit = "s";
  } else if (ns >= 1'000'000) {
    per = 1'000'000;
    unit = "ms";
  }
  // Three significant digits: as many decimals as the whole part leaves room for (below one
  // unit, only microseconds: thousandths, which are whole nanoseconds).
  int decimals = 0;
  std::int64_t scale = 1;
  if (ns < per) {
    decimals = 3;
    scale = 1'000;
  } else if (ns < 10 * per) {
    decimals = 2;
    scale = 100;
  } else if (ns < 100 * per) {
    decimals = 1;
    scale = 10;
  }
  // Below 100 units ns × scale < 1e12: no overflow.
  const std::int64_t scaled = decimals == 0 ? ns / per + (ns % per >= per / 2 ? 1 : 0)
                                            : (ns * scale + per / 2) / per;
  std::array<char, 24> text{};
  char* end = std::to_chars(text.data(), text.data() + text.size(), scaled / scale).ptr;
  if (decimals > 0) {
    std::int64_t fraction = scaled % scale;
    int kept = decimals;
    while (kept > 0 && fraction % 10 == 0) {  // "1.50" -> "1.5", "2.00" -> "2"
      fraction /= 10;
      --kept;
    }
    if (kept > 0) {
      *end++ = '.';
      char* digits = end;
      end += kept;
      for (char* p = end; p-- != digits;) {
        *p = static_cast<char>('0' + fraction % 10);
        fraction /= 10;
      }
    }
  }
  out.append(text.data(), end);
  out.append(unit);
}

std::string implausible_message(TimePoint start, TimePoint now, Duration estimate,
                                Deadline deadline, std::string_view key, Duration expected) {
  const Duration start_in = saturating_sub(start, now);
  const Duration finish_in = saturating_sub(saturating_add(start, estimate), now);
  const Duration deadline_in = deadline.slack(now);
  std::string text;
  text.reserve(160 + key.size());
  text += "predicted finish ";
  append_duration(text, finish_in);
  text += " after submission (start in ";
  append_duration(text, start_in);
  text += " + estimate ";
  append_duration(text, estimate);
  text += " for ";
  text += key;
  if (expected > Duration::zero()) {
    text += ", from its expected ";
    append_duration(text, expected);
  }
  if (finish_in > deadline_in) {
    text += ") > deadline in ";
    append_duration(text, deadline_in);
  } else {
    // Admission's second rule: it fits, but it would overtake a queued job that then misses.
    text += ") fits the deadline in ";
    append_duration(text, deadline_in);
    text += ", but it would make a queued job of its class miss its own";
  }
  return text;
}

}  // namespace sandglass::detail

namespace sandglass::detail {

std::string standing_queue_message(TimePoint start, TimePoint now, Duration target) {
  std::string text = "standing queue: predicted start in ";
  append_duration(text, saturating_sub(start, now));
  text += " > target delay ";
  append_duration(text, target);
  return text;
}

Duration fits_after(TimePoint start, TimePoint now, Duration estimate, Deadline deadline) {
  const Duration late = saturating_sub(saturating_add(start, estimate), deadline.time_point());
  if (late > Duration::zero()) return late;
  return std::max(saturating_sub(start, now), Duration::zero());
}

}  // namespace sandglass::detail
