#include "daemon/pg/libpq_support.hpp"

#include <algorithm>
#include <chrono>
#include <climits>

namespace sandglass::daemon::pg {

ConnectParams::ConnectParams(std::initializer_list<ConnectSetting> defaults,
                             const std::string& conninfo,
                             std::initializer_list<ConnectSetting> fixed) {
  const auto add = [this](const char* key, const char* value) {
    keys_.push_back(key);
    values_.push_back(value);
  };
  for (const ConnectSetting& s : defaults) add(s.key, s.value);
  add("dbname", conninfo.c_str());
  for (const ConnectSetting& s : fixed) add(s.key, s.value);
  add(nullptr, nullptr);
}

std::string one_line(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const bool space = c == '\n' || c == '\t' || c == ' ';
    if (space && (out.empty() || out.back() == ' ')) continue;
    out += space ? ' ' : c;
  }
  if (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

int poll_timeout(TimePoint until) {
  if (until == TimePoint::max()) return -1;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(saturating_sub(until, Clock::now()));
  if (left.count() <= 0) return 0;
  return static_cast<int>(std::min<std::chrono::milliseconds::rep>(left.count(), INT_MAX));
}

}  // namespace sandglass::daemon::pg
