#include <sandglass/daemon/kind_registry.hpp>

#include <sandglass/daemon/daemon_config.hpp>

#include "daemon/kinds/builtin_kinds.hpp"

#include <boost/json/value.hpp>

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

namespace sandglass::daemon {

void KindRegistry::add(std::string name, JobKind kind) {
  if (name.empty()) throw std::invalid_argument{"KindRegistry::add: empty kind name"};
  if (!kind.prepare) throw std::invalid_argument{"KindRegistry::add: kind \"" + name + "\" has no prepare"};
  const auto [it, inserted] = kinds_.try_emplace(name, std::move(kind));
  if (!inserted) throw std::invalid_argument{"KindRegistry::add: kind \"" + name + "\" exists"};
}

const JobKind* KindRegistry::find(std::string_view name) const noexcept {
  const auto it = kinds_.find(name);
  return it == kinds_.end() ? nullptr : &it->second;
}

std::vector<std::string> KindRegistry::names() const {
  std::vector<std::string> out;
  out.reserve(kinds_.size());
  for (const auto& [name, kind] : kinds_) out.push_back(name);
  return out;
}

KindRegistry builtin_kinds(const DaemonConfig& config) {
  KindRegistry kinds;
  kinds.add("sleep", make_sleep_kind());
  kinds.add("spin", make_spin_kind());
  kinds.add("exec", make_exec_kind(config.commands));
  kinds.add("forward", make_forward_kind(config));
  kinds.add("sql", make_sql_kind(config));
  return kinds;
}

namespace {

std::string field_of(std::string_view key) { return "args." + std::string{key}; }

// Whether `d` is a whole number that an int64 holds. Checked before the cast, which is undefined
// for a value out of range (1e300 reached it; found by fuzz_job_request).
bool is_whole_int64(double d) {
  constexpr double kTwoTo63 = 9223372036854775808.0;
  return d >= -kTwoTo63 && d < kTwoTo63 && d == std::trunc(d);
}

std::int64_t to_int(const boost::json::value& v, std::string_view key, std::int64_t min,
                    std::int64_t max) {
  const std::string range = "must be an integer from " + std::to_string(min) + " to " + std::to_string(max);
  std::int64_t n = 0;
  if (v.is_int64()) {
    n = v.get_int64();
  } else if (v.is_uint64()) {
    throw ArgsError{field_of(key), range};  // above INT64_MAX
  } else if (v.is_double() && is_whole_int64(v.get_double())) {
    n = static_cast<std::int64_t>(v.get_double());  // 5.0 is 5; 5.5 is not an integer
  } else {
    throw ArgsError{field_of(key), range};
  }
  if (n < min || n > max) throw ArgsError{field_of(key), range + ", got " + std::to_string(n)};
  return n;
}

}  // namespace

std::int64_t require_int(const boost::json::object& args, std::string_view key, std::int64_t min,
                         std::int64_t max) {
  const boost::json::value* v = args.if_contains(key);
  if (v == nullptr) throw ArgsError{field_of(key), "is required"};
  return to_int(*v, key, min, max);
}

std::int64_t optional_int(const boost::json::object& args, std::string_view key,
                          std::int64_t fallback, std::int64_t min, std::int64_t max) {
  const boost::json::value* v = args.if_contains(key);
  return v == nullptr ? fallback : to_int(*v, key, min, max);
}

std::string require_string(const boost::json::object& args, std::string_view key) {
  const boost::json::value* v = args.if_contains(key);
  if (v == nullptr) throw ArgsError{field_of(key), "is required"};
  if (!v->is_string()) throw ArgsError{field_of(key), "must be a string"};
  return std::string{v->get_string()};
}

void reject_unknown_keys(const boost::json::object& args,
                         std::initializer_list<std::string_view> known) {
  for (const auto& [key, value] : args) {
    bool ok = false;
    for (std::string_view k : known) ok = ok || key == k;
    if (!ok) throw ArgsError{field_of(key), "is not a known argument"};
  }
}

}  // namespace sandglass::daemon
