// daemon_config.cpp — DaemonConfig from TOML (toml++), command-line overrides, and validate().
//
// Each table of the file is a list of fields; a field's setter reads one node, checks its type
// and range, and names the dotted key when it throws. `apply_setting` feeds command-line text
// through the same setters, so a flag accepts exactly what its key accepts in the file. The
// sections are read and checked in their own files (config_reader.hpp lists them); this one
// reads the root of the file and [log], and puts the checks together.
#include <sandglass/daemon/daemon_config.hpp>

#include "daemon/config/config_reader.hpp"
#include "daemon/config/sql_config_reader.hpp"
#include "daemon/logging.hpp"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <cerrno>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>
#include <vector>

namespace sandglass::daemon {
namespace config {
namespace {

constexpr Field<DaemonConfig> kLogFields[] = {
    {"level", [](DaemonConfig& c, const Entry& e) { c.log_level = e.one_of(kLogLevels); }},
    {"format", [](DaemonConfig& c, const Entry& e) { c.log_format = e.one_of(kLogFormats); }},
};

// The tables with fixed keys; [kinds.NAME] and [commands.NAME] are read below.
struct Section {
  std::string_view name;
  std::span<const Field<DaemonConfig>> fields;
};

std::span<const Section> sections() {
  static const Section kSections[] = {{"server", server_fields()},
                                      {"runtime", runtime_fields()},
                                      {"budget", budget_fields()},
                                      {"records", records_fields()},
                                      {"admission", admission_fields()},
                                      {"log", kLogFields}};
  return kSections;
}

const Section* find_section(std::string_view name) {
  const auto all = sections();
  const auto it = std::ranges::find(all, name, &Section::name);
  return it == all.end() ? nullptr : &*it;
}

void read_root(DaemonConfig& config, const toml::table& root) {
  for (auto&& [name, node] : root) {
    const Entry entry{key_text(name.str()), node};
    if (name.str() == "kinds") {
      read_kinds(config, entry);
    } else if (name.str() == "commands") {
      read_commands(config, entry);
    } else if (name.str() == "upstreams") {
      read_upstreams(config, entry);
    } else if (name.str() == "databases") {
      read_databases(config, node);
    } else if (name.str() == "queries") {
      read_queries(config, node);
    } else if (name.str() == "cluster") {
      read_cluster(config, entry);
    } else if (const Section* section = find_section(name.str())) {
      read_fields<DaemonConfig>(config, entry, section->fields);
    } else {
      std::vector<std::string_view> known;
      for (const Section& s : sections()) known.push_back(s.name);
      known.insert(known.end(), {"kinds", "commands", "upstreams", "databases", "queries", "cluster"});
      throw ConfigError{entry.key(), "unknown key; known tables: " + join(known)};
    }
  }
}

}  // namespace
}  // namespace config

void DaemonConfig::validate() const {
  using namespace config;
  validate_server(*this);
  validate_runtime(*this);
  check_one_of("log.level", log_level, kLogLevels);
  check_one_of("log.format", log_format, kLogFormats);
  validate_commands(*this);
  validate_auth(*this);
  validate_sql_config(*this);
  validate_cluster(*this);
}

DaemonConfig parse_config(std::string_view toml_text, std::string_view source) {
  toml::table root;
  try {
    root = toml::parse(toml_text, source);
  } catch (const toml::parse_error& e) {
    throw ConfigError{std::string{source},
                      fmt::format("line {}, column {}: {}", e.source().begin.line,
                                  e.source().begin.column, e.description())};
  }
  DaemonConfig config;
  config::read_root(config, root);
  return config;
}

DaemonConfig load_config_file(const std::string& path) {
  using config::quote_string;
  // An ifstream opens a directory without complaint and then reads nothing.
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored)) {
    throw ConfigError{"--config",
                      fmt::format("cannot read {}: it is a directory", quote_string(path))};
  }
  std::ifstream in{path, std::ios::binary};
  if (!in) {
    const int error = errno;  // set by the failed open(2)
    throw ConfigError{"--config", fmt::format("cannot read {}: {}", quote_string(path),
                                              std::generic_category().message(error))};
  }
  const std::string text{std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
  if (in.bad()) throw ConfigError{"--config", fmt::format("cannot read {}", quote_string(path))};
  return parse_config(text, path);
}

void apply_setting(DaemonConfig& config, std::string_view key, std::string_view text) {
  using namespace config;
  const std::size_t dot = key.find('.');
  const Section* section =
      dot == std::string_view::npos ? nullptr : find_section(key.substr(0, dot));
  const Field<DaemonConfig>* field =
      section == nullptr ? nullptr : find_field(section->fields, key.substr(dot + 1));
  if (field == nullptr) throw ConfigError{std::string{key}, "not a key that can be set this way"};

  std::int64_t number = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, number);
  if (!text.empty() && error == std::errc{} && stop == end) {
    const toml::value<std::int64_t> node{number};
    field->set(config, Entry{std::string{key}, node});
  } else {
    const toml::value<std::string> node{std::string{text}};
    field->set(config, Entry{std::string{key}, node});
  }
}

}  // namespace sandglass::daemon
