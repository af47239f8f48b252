// builtin_kinds.hpp (private) — the job kinds every sandglassd serves.
//
//   sleep {"ms": N}                      waits on the job's deadline-aware sleep; cancellable
//   spin  {"ms": N}                      burns CPU, with a checkpoint at least every 100 us
//   exec  {"command": NAME, "stdin"?: S} runs a command from the config (see exec_kind.cpp)
//   forward {"upstream": NAME, "body": J} POSTs J to a configured upstream (forward_kind.cpp)
//   sql   {"query": NAME, "params": [..]} runs a configured PostgreSQL statement (sql_kind.cpp)
#pragma once

#include <sandglass/daemon/daemon_config.hpp>
#include <sandglass/daemon/kind_registry.hpp>

#include <chrono>
#include <map>
#include <string>

namespace sandglass::daemon {

// The `ms` of a sleep or spin job (0 to a day; throws ArgsError naming args.ms): how long it
// runs, and so its size hint (JobKind::expected; zero: none).
std::chrono::milliseconds own_duration_ms(const boost::json::object& args);

JobKind make_sleep_kind();
JobKind make_spin_kind();
JobKind make_exec_kind(std::map<std::string, CommandConfig, std::less<>> commands);
JobKind make_forward_kind(const DaemonConfig& config);
// Opens one connection per configured database at once (a database that cannot be reached is
// logged as a warning, not an error). Blocks for at most each database's connect_timeout_ms.
JobKind make_sql_kind(const DaemonConfig& config);

}  // namespace sandglass::daemon
