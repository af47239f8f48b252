// [kinds.NAME] (a kind's concurrency limit) and [commands.NAME] (what the exec kind may run).
#include "daemon/config/config_reader.hpp"

#include <utility>

namespace sandglass::daemon::config {
namespace {

constexpr Field<std::size_t> kKindFields[] = {
    {"limit", [](std::size_t& limit, const Entry& e) { limit = e.count(1, kMaxCount); }},
};

constexpr std::string_view kArgvForm = "a non-empty array of strings, the first an absolute path";

void read_argv(CommandConfig& command, const Entry& e) {
  const toml::array& items = e.array(kArgvForm);
  command.argv.clear();
  for (std::size_t i = 0; i < items.size(); ++i) {
    command.argv.push_back(Entry{fmt::format("{}[{}]", e.key(), i), items[i]}.string());
  }
}

void read_env(CommandConfig& command, const Entry& e) {
  command.env.clear();
  for (auto&& [name, node] : e.table()) {
    command.env.insert_or_assign(std::string{name.str()}, e.child(name.str(), node).string());
  }
}

constexpr Field<CommandConfig> kCommandFields[] = {
    {"argv", read_argv},
    {"env", read_env},
    {"working_directory",
     [](CommandConfig& c, const Entry& e) { c.working_directory = e.string("an absolute path"); }},
    {"max_output_bytes",
     [](CommandConfig& c, const Entry& e) { c.max_output_bytes = e.count(0, kMaxBytes); }},
    {"kill_grace_ms", [](CommandConfig& c, const Entry& e) { c.kill_grace = e.ms(0); }},
    {"allow_stdin", [](CommandConfig& c, const Entry& e) { c.allow_stdin = e.boolean(); }},
};

// What a command must satisfy on its own; for the file and for configs built in code.
void check_command(const std::string& key, const CommandConfig& command) {
  if (command.argv.empty()) {
    throw ConfigError{key + ".argv", fmt::format("is missing or empty; must be {}", kArgvForm)};
  }
  if (!command.argv.front().starts_with('/')) {
    throw ConfigError{key + ".argv",
                      "argv[0] must be an absolute path (there is no PATH search), got " +
                          quote_string(command.argv.front())};
  }
  if (!command.working_directory.starts_with('/')) {
    throw ConfigError{key + ".working_directory",
                      "must be an absolute path, got " + quote_string(command.working_directory)};
  }
  for (const auto& [name, value] : command.env) {
    if (name.empty() || name.find('=') != std::string::npos) {
      throw ConfigError{key + ".env." + name, "a variable name must be non-empty and without '='"};
    }
  }
  if (command.kill_grace < milliseconds::zero()) {
    throw ConfigError{key + ".kill_grace_ms",
                      fmt::format("must not be negative, got {}", ms_count(command.kill_grace))};
  }
}

}  // namespace

void read_kinds(DaemonConfig& config, const Entry& kinds) {
  for (auto&& [name, node] : kinds.table()) {
    const Entry kind = kinds.child(name.str(), node);
    if (name.str().empty()) throw ConfigError{kinds.key(), "a kind name must not be empty"};
    std::size_t limit = 0;  // `limit` takes 1 and more: 0 means it was not given
    read_fields<std::size_t>(limit, kind, kKindFields);
    if (limit == 0) {
      throw ConfigError{kind.key() + ".limit",
                        "is missing (the most jobs of this kind that may run at once)"};
    }
    config.runtime.kind_limits.insert_or_assign(std::string{name.str()}, limit);
  }
}

void read_commands(DaemonConfig& config, const Entry& commands) {
  for (auto&& [name, node] : commands.table()) {
    const Entry entry = commands.child(name.str(), node);
    if (name.str().empty()) throw ConfigError{commands.key(), "a command name must not be empty"};
    CommandConfig command;
    read_fields<CommandConfig>(command, entry, kCommandFields);
    check_command(entry.key(), command);
    config.commands.insert_or_assign(std::string{name.str()}, std::move(command));
  }
}

void validate_commands(const DaemonConfig& config) {
  for (const auto& [name, command] : config.commands) {
    check_command("commands." + key_text(name), command);
  }
}

}  // namespace sandglass::daemon::config
