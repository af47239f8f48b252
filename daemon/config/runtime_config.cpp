// [runtime], [budget], [records] and [admission]: the Runtime's options, the budget policy, how
// long the daemon keeps the records of finished jobs, and the standing-queue rule.
#include "daemon/config/config_reader.hpp"

#include <utility>

namespace sandglass::daemon::config {
namespace {

// RuntimeOptions::validate() names a C++ field ("budget.max_budget: ..."); this names its key.
ConfigError runtime_options_error(const std::string& error) {
  static constexpr std::pair<std::string_view, std::string_view> kKeys[] = {
      {"workers", "runtime.workers"},
      {"capacity", "runtime.capacity"},
      {"estimate_quantile", "runtime.estimate_quantile"},
      {"estimate_window", "runtime.estimate_window"},
      {"estimate_max_age", "runtime.estimate_max_age_ms"},
      {"estimate_age_in_runs", "runtime.estimate_age_in_runs"},
      {"overrun_after", "runtime.overrun_after_ms"},
      {"queue_delay_target", "admission.queue_delay_target_ms"},
      {"budget.min_useful", "budget.min_ms"},
      {"budget.default_budget", "budget.default_ms"},
      {"budget.max_budget", "budget.max_ms"},
      {"budget.reserve", "budget.reserve_ms"},
  };
  const std::size_t colon = error.find(": ");
  if (colon == std::string::npos) return ConfigError{"runtime", error};
  const std::string field = error.substr(0, colon);
  const std::string message = error.substr(colon + 2);
  for (const auto& [name, key] : kKeys) {
    if (field == name) return ConfigError{std::string{key}, message};
  }
  constexpr std::string_view kKindPrefix = "kind_limits.";
  if (field.starts_with(kKindPrefix)) {
    return ConfigError{"kinds." + field.substr(kKindPrefix.size()) + ".limit", message};
  }
  return ConfigError{"runtime", error};
}

}  // namespace

std::span<const Field<DaemonConfig>> runtime_fields() {
  static constexpr Field<DaemonConfig> kRuntimeFields[] = {
    {"workers", [](DaemonConfig& c, const Entry& e) { c.runtime.workers = e.count(1, 1024); }},
    {"capacity",
     [](DaemonConfig& c, const Entry& e) { c.runtime.capacity = e.count(1, kMaxCount); }},
    {"drain_timeout_ms", [](DaemonConfig& c, const Entry& e) { c.drain_timeout = e.ms(0); }},
    {"drop_if_cannot_finish",
     [](DaemonConfig& c, const Entry& e) { c.runtime.drop_if_cannot_finish = e.boolean(); }},
    {"estimate_quantile",
     [](DaemonConfig& c, const Entry& e) { c.runtime.estimate_quantile = e.fraction(); }},
    {"estimate_window",
     [](DaemonConfig& c, const Entry& e) { c.runtime.estimate_window = e.count(1, 1'000'000); }},
    {"estimate_max_age_ms",
     [](DaemonConfig& c, const Entry& e) { c.runtime.estimate_max_age = e.ms(0); }},
    {"estimate_age_in_runs",
     [](DaemonConfig& c, const Entry& e) { c.runtime.estimate_age_in_runs = e.number(1'000'000); }},
    {"overrun_after_ms",
     [](DaemonConfig& c, const Entry& e) { c.runtime.overrun_after = e.ms(1); }},
};
  return kRuntimeFields;
}

std::span<const Field<DaemonConfig>> budget_fields() {
  static constexpr Field<DaemonConfig> kBudgetFields[] = {
    {"default_ms",
     [](DaemonConfig& c, const Entry& e) { c.runtime.budget.default_budget = e.ms(1); }},
    {"max_ms", [](DaemonConfig& c, const Entry& e) { c.runtime.budget.max_budget = e.ms(1); }},
    {"min_ms", [](DaemonConfig& c, const Entry& e) { c.runtime.budget.min_useful = e.ms(0); }},
    {"reserve_ms", [](DaemonConfig& c, const Entry& e) { c.runtime.budget.reserve = e.ms(0); }},
};
  return kBudgetFields;
}

std::span<const Field<DaemonConfig>> admission_fields() {
  static constexpr Field<DaemonConfig> kAdmissionFields[] = {
    {"queue_delay_target_ms",
     [](DaemonConfig& c, const Entry& e) { c.runtime.queue_delay_target = e.ms(0); }},
};
  return kAdmissionFields;
}

std::span<const Field<DaemonConfig>> records_fields() {
  static constexpr Field<DaemonConfig> kRecordsFields[] = {
    {"keep_ms", [](DaemonConfig& c, const Entry& e) { c.records.keep = e.ms(1); }},
    {"max_count",
     [](DaemonConfig& c, const Entry& e) { c.records.max_count = e.count(1, kMaxCount); }},
    {"max_bytes",
     [](DaemonConfig& c, const Entry& e) { c.records.max_bytes = e.count(1, kMaxBytes); }},
};
  return kRecordsFields;
}

void validate_runtime(const DaemonConfig& c) {
  check_at_least("runtime.drain_timeout_ms", c.drain_timeout.count(), 0);

  // min_ms <= default_ms <= max_ms, named in the file's terms before RuntimeOptions' own check.
  const BudgetPolicy& budget = c.runtime.budget;
  if (budget.min_useful > budget.default_budget) {
    throw ConfigError{"budget.min_ms",
                      fmt::format("must not be greater than budget.default_ms ({}), got {}",
                                  ms_count(budget.default_budget), ms_count(budget.min_useful))};
  }
  if (budget.max_budget < budget.default_budget) {
    throw ConfigError{"budget.max_ms",
                      fmt::format("must not be less than budget.default_ms ({}), got {}",
                                  ms_count(budget.default_budget), ms_count(budget.max_budget))};
  }
  if (const std::string error = c.runtime.validate(); !error.empty()) {
    throw runtime_options_error(error);
  }

  check_at_least("records.keep_ms", c.records.keep.count(), 1);
  check_at_least("records.max_count", c.records.max_count, 1);
  check_at_least("records.max_bytes", c.records.max_bytes, 1);
}

}  // namespace sandglass::daemon::config
