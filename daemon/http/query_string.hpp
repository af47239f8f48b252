// query_string.hpp (private) — a request target's query, split into its parameters.
//
//   for (const QueryParameter& p : split_query("state=running&limit=5")) { ... }
//
// Splitting knows nothing of which names an endpoint takes; each endpoint's parser checks them
// and names the parameter in its error. Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sandglass::daemon {

struct QueryParameter {
  std::string_view name;
  std::string_view value;  // as sent: still percent-encoded
};

// The parameters of `query` (the target after '?') in order: "a=1&b" gives {a, 1}, {b, ""}.
// Empty pairs ("a=1&&b=2") are skipped. The views point into `query`.
std::vector<QueryParameter> split_query(std::string_view query);

// Whether a parameter's name can go into a JSON error as its field: non-empty printable ASCII
// (a request target may hold any byte above 0x7F, and a JSON answer must be UTF-8).
bool printable_name(std::string_view name) noexcept;

// "%3Cimg%20x%3E" -> "<img x>", '+' -> ' '; nullopt for a malformed escape.
std::optional<std::string> percent_decode(std::string_view text);

}  // namespace sandglass::daemon
