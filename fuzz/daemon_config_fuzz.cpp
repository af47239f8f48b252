// Fuzzes the config file parser: parse_config on the input as TOML text, then validate(), as
// sandglassd --check-config does. Either may throw ConfigError, which must name a key and say
// something; nothing else may escape, crash or hang. A config that passes both is written
// back as flags through apply_setting, which must accept what the file accepted.
#include "fuzz_check.hpp"

#include <sandglass/daemon/daemon_config.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace {

using namespace sandglass::daemon;

// A few keys that flags may set, set again from the parsed value: the same checks apply.
void reapply(DaemonConfig& config) {
  const DaemonConfig copy = config;
  apply_setting(config, "runtime.workers", std::to_string(copy.runtime.workers));
  apply_setting(config, "server.max_body_bytes", std::to_string(copy.limits.max_body_bytes));
  apply_setting(config, "log.level", copy.log_level);
  FUZZ_CHECK(config.runtime.workers == copy.runtime.workers);
  FUZZ_CHECK(config.limits.max_body_bytes == copy.limits.max_body_bytes);
  FUZZ_CHECK(config.log_level == copy.log_level);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text{reinterpret_cast<const char*>(data), size};
  try {
    DaemonConfig config = parse_config(text, "fuzz.toml");
    config.validate();
    reapply(config);
  } catch (const ConfigError& e) {
    FUZZ_CHECK(!e.key().empty());
    FUZZ_CHECK(std::string_view{e.what()}.size() > e.key().size());
  }
  return 0;
}
