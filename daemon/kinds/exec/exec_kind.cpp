// The `exec` kind: runs a command from the config's `[commands.NAME]` tables.
//
//   request args   {"command": "NAME", "stdin": "text"}      ("stdin" optional)
//   result         {"command": "NAME", "exit_code": 0, "signal": null,
//                   "stdout": "...", "stderr": "...",
//                   "stdout_truncated": false, "stderr_truncated": false}
//
// Outcomes: exit status 0 completes the job. Another status, or a signal that we did not send,
// fails it ("command NAME exited with status 3", "command NAME was killed by signal 9").
// Cancellation (deadline, caller, upstream, shutdown) stops the command (SIGTERM to its process
// group, SIGKILL after `kill_grace`) and the job ends cancelled. A command that cannot be
// started fails the job with the reason. The result is set in every case; `exit_code` and
// `signal` are null when they do not apply (both null: the command never ran).
//
// `stdout` and `stderr` hold at most `max_output_bytes` bytes of each stream, as the command
// wrote them, except that every byte that is not part of a well-formed UTF-8 sequence becomes
// U+FFFD, so the result is always valid JSON text (the JSON string may therefore be longer than
// the limit, and a character cut by the limit shows as U+FFFD).
#include "daemon/kinds/builtin_kinds.hpp"
#include "daemon/kinds/configured_estimate_key.hpp"
#include "daemon/kinds/exec/child_process.hpp"

#include <sandglass/cancel.hpp>
#include <sandglass/job_context.hpp>

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

namespace sandglass::daemon {

namespace {

using Commands = std::map<std::string, CommandConfig, std::less<>>;

// Length of the well-formed UTF-8 sequence at the start of `s`, or 0 if there is none
// (overlong forms, surrogates and code points above U+10FFFF are not well-formed).
std::size_t utf8_sequence_length(std::string_view s) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const auto continuation = [&](std::size_t i) { return i < s.size() && (byte(i) & 0xC0) == 0x80; };
  const unsigned char b0 = byte(0);
  if (b0 < 0x80) return 1;
  if (b0 >= 0xC2 && b0 <= 0xDF) return continuation(1) ? 2 : 0;
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    if (!continuation(1) || !continuation(2)) return 0;
    if (b0 == 0xE0 && byte(1) < 0xA0) return 0;   // overlong
    if (b0 == 0xED && byte(1) > 0x9F) return 0;   // surrogate
    return 3;
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    if (!continuation(1) || !continuation(2) || !continuation(3)) return 0;
    if (b0 == 0xF0 && byte(1) < 0x90) return 0;   // overlong
    if (b0 == 0xF4 && byte(1) > 0x8F) return 0;   // above U+10FFFF
    return 4;
  }
  return 0;
}

// `bytes` with every byte that is not part of a well-formed UTF-8 sequence replaced by U+FFFD.
std::string to_valid_utf8(std::string_view bytes) {
  std::string text;
  text.reserve(bytes.size());
  while (!bytes.empty()) {
    const std::size_t n = utf8_sequence_length(bytes);
    if (n == 0) {
      text += "\xEF\xBF\xBD";
      bytes.remove_prefix(1);
    } else {
      text.append(bytes.substr(0, n));
      bytes.remove_prefix(n);
    }
  }
  return text;
}

boost::json::value int_or_null(const std::optional<int>& v) {
  if (v) return *v;
  return nullptr;
}

std::string result_json(const std::string& name, const ChildReport& report) {
  boost::json::object result;
  result["command"] = name;
  result["exit_code"] = int_or_null(report.exit_code);
  result["signal"] = int_or_null(report.signal);
  result["stdout"] = to_valid_utf8(report.out.bytes);
  result["stderr"] = to_valid_utf8(report.err.bytes);
  result["stdout_truncated"] = report.out.truncated;
  result["stderr_truncated"] = report.err.truncated;
  return boost::json::serialize(result);
}

// Starts the command, waits for it and fills `report`. Throws as described at the top.
void run_command(JobContext& ctx, const std::string& name, const CommandConfig& command,
                 const std::string& input, ChildReport& report) {
  ctx.checkpoint();  // cancelled while queued or being dispatched: do not start anything
  std::optional<ChildProcess> child;
  try {
    child.emplace(command);
  } catch (const std::system_error& e) {
    throw std::runtime_error{"command " + name + " could not be started: " + e.what()};
  }
  {
    // Registered for as long as the child runs, and deregistered before `child` goes. A
    // cancellation from here on reaches run(), also one that came before this line (the
    // callback then runs at once).
    const CancelRegistration stop_on_cancel =
        ctx.on_cancel([&c = *child]() noexcept { c.request_stop(); });
    report = child->run(input);
  }
  if (report.stopped) throw Cancelled{ctx.cause()};
  if (report.exit_code == 0) return;
  if (report.signal) {
    throw std::runtime_error{"command " + name + " was killed by signal " +
                             std::to_string(*report.signal)};
  }
  throw std::runtime_error{"command " + name + " exited with status " +
                           (report.exit_code ? std::to_string(*report.exit_code) : "unknown")};
}

}  // namespace

JobKind make_exec_kind(std::map<std::string, CommandConfig, std::less<>> commands) {
  auto shared = std::make_shared<const Commands>(std::move(commands));
  return {.prepare = [shared](const boost::json::object& args) -> JobHandler {
    reject_unknown_keys(args, {"command", "stdin"});
    std::string name = require_string(args, "command");
    const auto it = shared->find(name);
    if (it == shared->end()) throw ArgsError{"args.command", "unknown command \"" + name + "\""};
    std::string input;
    if (const boost::json::value* stdin_value = args.if_contains("stdin")) {
      if (!it->second.allow_stdin) {
        throw ArgsError{"args.stdin", "is not allowed for command \"" + name + "\""};
      }
      if (!stdin_value->is_string()) throw ArgsError{"args.stdin", "must be a string"};
      input = std::string{stdin_value->get_string()};
    }

    // Shares ownership of the whole table; points at this command's entry.
    std::shared_ptr<const CommandConfig> command{shared, &it->second};
    return [command, name = std::move(name), input = std::move(input)](JobContext& ctx) {
      ChildReport report;
      try {
        run_command(ctx, name, *command, input, report);
      } catch (...) {
        ctx.set_result(result_json(name, report));
        throw;
      }
      ctx.set_result(result_json(name, report));
    };
  },
          // One estimate per configured command: a slow command must not make a fast one look
          // implausible. The name is the config's, so the keys are bounded by it.
          .estimate_key = [shared](const boost::json::object& args) {
            return configured_estimate_key(args, "command", *shared, "exec");
          }};
}

}  // namespace sandglass::daemon
