// answers.hpp — how `sandglass` shows what sandglassd answered and which exit code follows
// (exit_codes.hpp): a record on stdout (human-readable, or as it came with --json); an error
// answer's message, with the field it names, on stderr.
//
// Thread safety: functions that write to stdout and stderr; call them from one thread.
#pragma once

#include "cli/daemon_client.hpp"
#include "cli/exit_codes.hpp"

#include <boost/json/object.hpp>

#include <functional>
#include <optional>
#include <string>

namespace sandglass::cli {

// The answer's body as a JSON object; nullopt (after saying so on stderr) when it is not one.
std::optional<boost::json::object> answer_object(const DaemonReply& reply);

// A job's record, or an error answer. `waited`: see exit_code_of.
ExitCode show_job_answer(const DaemonReply& reply, bool json, bool waited);

// Any other answer (the listing, the stats): a 200 is shown with `render` (or as it came with
// --json) and is exit code 0; an error answer as above.
ExitCode show_answer(const DaemonReply& reply, bool json,
                     const std::function<std::string(const boost::json::object&)>& render);

// Says on stderr what an error answer (one without a record) says: usage for a 4xx, failed
// for anything else.
ExitCode show_error(const DaemonReply& reply, const boost::json::object& body);

}  // namespace sandglass::cli
