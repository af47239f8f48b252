#include "daemon/logging.hpp"

#include <sandglass/daemon/daemon_config.hpp>

#include <fmt/format.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>

namespace sandglass::daemon {
namespace {

// Pattern flags of our own (spdlog gives custom flags precedence over its built-in ones).
constexpr char kLevelFlag = '&';     // the level as the config names it: "warn", not "warning"
constexpr char kJsonTextFlag = '*';  // the message, escaped for a JSON string

constexpr std::string_view kTextPattern = "%Y-%m-%dT%H:%M:%S.%eZ [%&] %v";
constexpr std::string_view kJsonPattern =
    R"({"time":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%&","msg":"%*"})";

// Length of the well-formed UTF-8 sequence that starts `text` (RFC 3629, table 3-7), or 0.
std::size_t utf8_sequence_length(std::string_view text) {
  const auto byte = [text](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return 1;
  std::size_t length = 0;
  unsigned char low = 0x80;  // the range of the second byte; the others are 0x80-0xBF
  unsigned char high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;   // no overlong forms
    if (lead == 0xED) high = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;   // no overlong forms
    if (lead == 0xF4) high = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;
  }
  if (text.size() < length || byte(1) < low || byte(1) > high) return 0;
  for (std::size_t i = 2; i < length; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  }
  return length;
}

// Appends `text` as the inside of a JSON string: `"` and `\` escaped, control characters as
// \n, \t, ... or \u00XX, and bytes that are not UTF-8 as U+FFFD, so the line always parses.
void append_json_escaped(std::string_view text, spdlog::memory_buf_t& out) {
  const auto append = [&out](std::string_view s) { out.append(s.data(), s.data() + s.size()); };
  while (!text.empty()) {
    const char c = text.front();
    std::size_t used = 1;
    switch (c) {
      case '"':
        append(R"(\")");
        break;
      case '\\':
        append(R"(\\)");
        break;
      case '\n':
        append(R"(\n)");
        break;
      case '\r':
        append(R"(\r)");
        break;
      case '\t':
        append(R"(\t)");
        break;
      case '\b':
        append(R"(\b)");
        break;
      case '\f':
        append(R"(\f)");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          fmt::format_to(std::back_inserter(out), "\\u{:04x}", static_cast<unsigned char>(c));
        } else if (const std::size_t length = utf8_sequence_length(text); length > 0) {
          used = length;
          append(text.substr(0, length));
        } else {
          append("\\ufffd");
        }
    }
    text.remove_prefix(used);
  }
}

class LevelName final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& out) override {
    const std::string_view name = kLogLevels.at(static_cast<std::size_t>(msg.level));
    out.append(name.data(), name.data() + name.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<LevelName>();
  }
};

class JsonEscapedText final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& out) override {
    append_json_escaped(std::string_view{msg.payload.data(), msg.payload.size()}, out);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonEscapedText>();
  }
};

template <std::size_t N>
std::size_t index_of(std::string_view key, std::string_view name,
                     const std::array<std::string_view, N>& names) {
  const auto it = std::ranges::find(names, name);
  if (it == names.end()) {
    throw ConfigError{std::string{key},
                      fmt::format("must be one of {}, got \"{}\"", fmt::join(names, ", "), name)};
  }
  return static_cast<std::size_t>(it - names.begin());
}

}  // namespace

void setup_logging(std::string_view level, std::string_view format) {
  // kLogLevels is in spdlog's order, so the index is the level_enum.
  static_assert(spdlog::level::trace == 0 && spdlog::level::warn == 3 && spdlog::level::off == 6);
  const auto spd_level =
      static_cast<spdlog::level::level_enum>(index_of("log.level", level, kLogLevels));
  const bool json = index_of("log.format", format, kLogFormats) == 1;

  auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
  formatter->add_flag<LevelName>(kLevelFlag);
  if (json) formatter->add_flag<JsonEscapedText>(kJsonTextFlag);
  formatter->set_pattern(std::string{json ? kJsonPattern : kTextPattern});

  auto logger = std::make_shared<spdlog::logger>("sandglassd",
                                                 std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_formatter(std::move(formatter));
  logger->set_level(spd_level);
  spdlog::set_default_logger(std::move(logger));
}

}  // namespace sandglass::daemon
