#include "policy.hpp"

namespace sandglass::bench {

const std::vector<std::string_view>& policy_names() {
  static const std::vector<std::string_view> names{"fifo", "bounded-fifo", "drop-expired",
                                                   "sandglass"};
  return names;
}

std::unique_ptr<Policy> make_policy(std::string_view name, const PolicyOptions& options) {
  if (name == "fifo") return make_fifo_policy(options);
  if (name == "bounded-fifo") return make_queue_policy(options, true, false);
  if (name == "drop-expired") return make_queue_policy(options, false, true);
  if (name == "sandglass") return make_sandglass_policy(options);
  return nullptr;
}

}  // namespace sandglass::bench
