#include "cli/exit_codes.hpp"

#include <string_view>

namespace sandglass::cli {
namespace {

std::string_view text_of(const boost::json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  return v != nullptr && v->is_string() ? std::string_view{v->get_string()} : std::string_view{};
}

}  // namespace

ExitCode exit_code_of(const boost::json::object& record, bool waited) {
  const std::string_view state = text_of(record, "state");
  const std::string_view reason = text_of(record, "reason");
  if (state == "completed") return ExitCode::completed;
  if (state == "failed") {
    const bool out_of_budget =
        reason == "deadline_exceeded_before_dispatch" || reason == "retry_skipped_budget";
    return out_of_budget ? ExitCode::deadline : ExitCode::failed;
  }
  if (state == "rejected") return ExitCode::rejected;
  if (state == "expired") return ExitCode::deadline;
  if (state == "cancelled") {
    return text_of(record, "cause") == "deadline" ? ExitCode::deadline : ExitCode::cancelled;
  }
  if (!not_ended(record)) return ExitCode::failed;  // a state this client does not know
  return waited ? ExitCode::deadline : ExitCode::completed;
}

ExitCode exit_code_of_batch(const boost::json::object& answer) {
  bool refused = false;
  const auto* jobs = answer.if_contains("jobs");
  if (jobs == nullptr || !jobs->is_array()) return ExitCode::failed;
  for (const auto& j : jobs->get_array()) {
    if (!j.is_object()) continue;
    const boost::json::object& item = j.get_object();
    if (text_of(item, "state") == "rejected") return ExitCode::rejected;
    refused = refused || !item.contains("state");
  }
  return refused ? ExitCode::usage : ExitCode::completed;
}

bool not_ended(const boost::json::object& record) {
  const std::string_view state = text_of(record, "state");
  return state == "queued" || state == "running" || state == "scheduled" || state == "cancelling";
}

}  // namespace sandglass::cli
