// configured_estimate_key.hpp — the estimate key of a job that names a configured entry
// (`exec` a command, `sql` a query, `forward` an upstream), so that each entry has its own
// run-time estimate and the keys are bounded by the config.
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <string>
#include <string_view>

namespace sandglass::daemon {

// "PREFIX:NAME" when args[field] is a string naming an entry of `configured` (a map from the
// config's names that finds by std::string_view); "" (the kind's own estimate) otherwise.
template <typename ConfiguredMap>
std::string configured_estimate_key(const boost::json::object& args, std::string_view field,
                                    const ConfiguredMap& configured, std::string_view prefix) {
  const boost::json::value* v = args.if_contains(field);
  if (v == nullptr || !v->is_string()) return {};
  const auto it = configured.find(std::string_view{v->get_string()});
  return it == configured.end() ? std::string{} : std::string{prefix} + ":" + it->first;
}

}  // namespace sandglass::daemon
