#include "daemon/api/job_request.hpp"

#include "daemon/http/query_string.hpp"

#include <sandglass/wire_budget.hpp>

#include <boost/json/basic_parser_impl.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/parse_options.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <chrono>
#include <limits>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace sandglass::daemon {
namespace {

using Result = std::variant<JobRequest, RequestError>;

// An idempotency key is stored as text and sent in text arrays, so it must be well-formed UTF-8
// (no overlong forms, surrogates or code points past U+10FFFF) without NUL.
bool storable_key(std::string_view key) {
  for (std::size_t i = 0; i < key.size();) {
    const auto b = static_cast<unsigned char>(key[i]);
    if (b == 0) return false;
    if (b < 0x80) {
      ++i;
      continue;
    }
    const std::size_t n = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC2 ? 2 : 0;
    if (n == 0 || b > 0xF4 || i + n > key.size()) return false;
    char32_t cp = b & (0x7F >> n);
    for (std::size_t k = 1; k < n; ++k) {
      const auto c = static_cast<unsigned char>(key[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    const bool overlong = (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000);
    if (overlong || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return false;
    i += n;
  }
  return true;
}

// A Boost.JSON parser handler that only looks for a key that appears twice in one object.
// Boost.JSON keeps the last of them; another reader (a proxy, a log, a second parser) may keep
// the first, and then two parties act on different requests. So a body with one is refused.
class DuplicateKeyFinder {
 public:
  // With `index_elements`, an element of an array is named by its index ("jobs[2].kind");
  // without, by the array's key alone ("args.body.k").
  explicit DuplicateKeyFinder(bool index_elements) : index_elements_{index_elements} {}

  static constexpr std::size_t max_object_size = std::numeric_limits<std::size_t>::max();
  static constexpr std::size_t max_array_size = std::numeric_limits<std::size_t>::max();
  static constexpr std::size_t max_key_size = std::numeric_limits<std::size_t>::max();
  static constexpr std::size_t max_string_size = std::numeric_limits<std::size_t>::max();

  // The dotted path of the first duplicate key ("args.command"), or "" when there is none.
  const std::string& duplicate() const noexcept { return duplicate_; }

  bool on_document_begin(boost::system::error_code&) { return true; }
  bool on_document_end(boost::system::error_code&) { return true; }
  bool on_array_begin(boost::system::error_code&) {
    open(false);
    return true;
  }
  bool on_array_end(std::size_t, boost::system::error_code&) {
    frames_.pop_back();
    return true;
  }
  bool on_object_begin(boost::system::error_code&) {
    open(true);
    return true;
  }
  bool on_object_end(std::size_t, boost::system::error_code&) {
    frames_.pop_back();
    return true;
  }
  bool on_string_part(boost::json::string_view, std::size_t, boost::system::error_code&) { return true; }
  bool on_string(boost::json::string_view, std::size_t, boost::system::error_code&) {
    element();
    return true;
  }
  bool on_key_part(boost::json::string_view part, std::size_t, boost::system::error_code&) {
    key_.append(part.data(), part.size());
    return true;
  }
  bool on_key(boost::json::string_view part, std::size_t, boost::system::error_code& ec) {
    key_.append(part.data(), part.size());
    Frame& object = frames_.back();
    if (!object.keys.insert(key_).second) {
      duplicate_ = path_to(key_);
      ec = boost::json::error::syntax;  // stops the parser; duplicate() says why
      return false;
    }
    object.last_key = std::move(key_);
    key_.clear();
    return true;
  }
  bool on_number_part(boost::json::string_view, boost::system::error_code&) { return true; }
  bool on_int64(std::int64_t, boost::json::string_view, boost::system::error_code&) { return element(); }
  bool on_uint64(std::uint64_t, boost::json::string_view, boost::system::error_code&) { return element(); }
  bool on_double(double, boost::json::string_view, boost::system::error_code&) { return element(); }
  bool on_bool(bool, boost::system::error_code&) { return element(); }
  bool on_null(boost::system::error_code&) { return element(); }
  bool on_comment_part(boost::json::string_view, boost::system::error_code&) { return true; }
  bool on_comment(boost::json::string_view, boost::system::error_code&) { return true; }

 private:
  // An open object or array. Each holds only its own key, so the work stays linear in the
  // body's size; the dotted path is built only for the error.
  struct Frame {
    bool object = true;
    std::string key;  // of the value this is: the key in the enclosing object, or the enclosing
                      // array's key for an element; "" at the top
    std::set<std::string, std::less<>> keys;  // objects: the keys read so far
    std::string last_key;                     // objects: the key whose value is being read
    std::size_t elements = 0;                 // arrays: the elements begun so far
  };

  // A value begins: counted when it is an element of an array.
  bool element() {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().elements;
    return true;
  }

  void open(bool object) {
    std::string key;
    if (!frames_.empty()) {
      Frame& parent = frames_.back();
      key = parent.object ? parent.last_key : parent.key;
      if (!parent.object && index_elements_) key += "[" + std::to_string(parent.elements) + "]";
    }
    element();
    frames_.push_back({.object = object, .key = std::move(key), .keys = {}, .last_key = {}, .elements = 0});
  }

  // "args.body.k": the keys of the enclosing objects (arrays add nothing), then `key`.
  std::string path_to(const std::string& key) const {
    std::string path;
    for (const Frame& frame : frames_) {
      if (!frame.object || frame.key.empty()) continue;
      path += frame.key;
      path += '.';
    }
    return path + key;
  }

  const bool index_elements_;
  std::vector<Frame> frames_;
  std::string key_;  // the key being read
  std::string duplicate_;
};

// The dotted path of a key that appears twice in one object of `json` (valid JSON), or "".
std::string duplicate_key(std::string_view json, const boost::json::parse_options& options,
                          bool index_elements) {
  boost::json::basic_parser<DuplicateKeyFinder> parser{options, index_elements};
  boost::system::error_code ec;
  parser.write_some(false, json.data(), json.size(), ec);
  return parser.handler().duplicate();
}

std::optional<Duration> smaller(std::optional<Duration> a, Duration b) {
  return a ? std::min(*a, b) : b;
}

// timeout_ms: a non-negative integer; huge values saturate.
std::optional<RequestError> read_timeout_ms(const boost::json::value& v, JobRequest& out) {
  const char* const kMessage = "must be a non-negative integer (milliseconds)";
  std::chrono::milliseconds ms{};
  if (v.is_int64() && v.get_int64() >= 0) {
    ms = std::chrono::milliseconds{v.get_int64()};
  } else if (v.is_uint64()) {
    ms = std::chrono::milliseconds::max();
  } else {
    return RequestError{"timeout_ms", kMessage};
  }
  // Saturate instead of overflowing the nanosecond Duration.
  constexpr auto kMaxMs = std::chrono::duration_cast<std::chrono::milliseconds>(Duration::max());
  out.budget = smaller(out.budget, ms >= kMaxMs ? Duration::max() : Duration{ms});
  return std::nullopt;
}

// expected_ms: a positive integer, the job's own expected run time (JobSpec::expected).
std::optional<RequestError> read_expected_ms(const boost::json::value& v, JobRequest& out) {
  constexpr auto kMaxMs = std::chrono::duration_cast<std::chrono::milliseconds>(Duration::max());
  if (!v.is_int64() || v.get_int64() <= 0 || v.get_int64() >= kMaxMs.count()) {
    return RequestError{"expected_ms", "must be a positive integer (milliseconds)"};
  }
  out.expected = std::chrono::milliseconds{v.get_int64()};
  return std::nullopt;
}

// delay_ms: an integer from 0 to `max_delay`.
std::optional<RequestError> read_delay_ms(const boost::json::value& v, std::chrono::milliseconds max_delay,
                                          JobRequest& out) {
  if (!v.is_int64() || v.get_int64() < 0 || v.get_int64() > max_delay.count()) {
    return RequestError{"delay_ms", "must be an integer from 0 to " + std::to_string(max_delay.count()) +
                                        " (milliseconds; the daemon's server.max_delay_ms)"};
  }
  out.delay = std::chrono::milliseconds{v.get_int64()};
  return std::nullopt;
}

// retry: {"max_attempts": 1..kMaxRetryAttempts, "backoff_ms": an integer >= 0 (default 100)}.
std::optional<RequestError> read_retry(const boost::json::value& v, JobRequest& out) {
  if (!v.is_object()) return RequestError{"retry", "must be an object with max_attempts and backoff_ms"};
  JobRetry retry;
  bool has_attempts = false;
  for (const auto& [key, value] : v.get_object()) {
    if (key == "max_attempts") {
      if (!value.is_int64() || value.get_int64() < 1 || value.get_int64() > kMaxRetryAttempts) {
        return RequestError{"retry.max_attempts", "must be an integer from 1 to " +
                                                      std::to_string(kMaxRetryAttempts) +
                                                      " (attempts in all; 1: no retry)"};
      }
      retry.max_attempts = static_cast<int>(value.get_int64());
      has_attempts = true;
    } else if (key == "backoff_ms") {
      constexpr auto kMaxMs = std::chrono::duration_cast<std::chrono::milliseconds>(Duration::max());
      if (!value.is_int64() || value.get_int64() < 0 || value.get_int64() >= kMaxMs.count() / 2) {
        return RequestError{"retry.backoff_ms", "must be a non-negative integer (milliseconds)"};
      }
      retry.backoff = std::chrono::milliseconds{value.get_int64()};
    } else {
      return RequestError{"retry." + std::string{key}, "is not a known field"};
    }
  }
  if (!has_attempts) return RequestError{"retry.max_attempts", "is required"};
  out.retry = retry;
  return std::nullopt;
}

std::optional<RequestError> read_body_field(std::string_view key, const boost::json::value& v,
                                            JobRequest& out) {
  if (key == "kind") {
    if (!v.is_string() || v.get_string().empty()) return RequestError{"kind", "must be a non-empty string"};
    out.kind = v.get_string();
  } else if (key == "args") {
    if (!v.is_object()) return RequestError{"args", "must be an object"};
    out.args = v.get_object();
  } else if (key == "priority") {
    const auto p = v.is_string() ? priority_from_string(v.get_string()) : std::nullopt;
    if (!p) return RequestError{"priority", "must be one of critical, high, normal, sheddable"};
    out.priority = *p;
  } else if (key == "timeout_ms") {
    return read_timeout_ms(v, out);
  } else if (key == "expected_ms") {
    return read_expected_ms(v, out);
  } else if (key == "retry") {
    return read_retry(v, out);
  } else if (key == "idempotency_key") {
    if (!v.is_string() || v.get_string().empty() || v.get_string().size() > kMaxIdempotencyKeyBytes) {
      return RequestError{"idempotency_key", "must be a string of 1 to 256 bytes"};
    }
    if (!storable_key(v.get_string())) {
      return RequestError{"idempotency_key", "must not contain NUL (\\u0000)"};
    }
    out.idempotency_key = v.get_string();
  } else if (key.empty()) {
    // An error must name a field; an empty one would name none (found by fuzz_job_request).
    return RequestError{"body", "has a field with an empty name, which is not a known field"};
  } else {
    return RequestError{std::string{key}, "is not a known field"};
  }
  return std::nullopt;
}

}  // namespace

std::optional<RequestError> read_wire_budgets(const HttpRequest& request, JobRequest& out) {
  for (const auto& [name, value] : request.headers) {
    WireBudget b;
    if (name == kRequestTimeoutHeader) {
      b = parse_request_timeout_ms(value);
    } else if (name == kGrpcTimeoutHeader) {
      b = parse_grpc_timeout(value);
    } else {
      continue;
    }
    if (!b) return RequestError{name, b.error};
    out.budget = smaller(out.budget, *b.budget);
  }
  return std::nullopt;
}

namespace {

// The error for a query parameter other than `wait`, naming it as its field. A request target
// may hold any byte above 0x7F, and the field goes back in a JSON answer, which must be UTF-8:
// a name that is not printable ASCII is named "query" instead.
RequestError unknown_query_parameter(std::string_view key) {
  if (printable_name(key)) return RequestError{std::string{key}, "is not a known query parameter"};
  return RequestError{"query", "has a parameter whose name is empty or not printable ASCII"};
}

}  // namespace

std::variant<bool, RequestError> parse_wait_query(std::string_view query, bool wait_by_default) {
  bool wait = wait_by_default;
  for (const auto& [key, value] : split_query(query)) {
    if (key != "wait") return unknown_query_parameter(key);
    if (value == "true" || value == "1") {
      wait = true;
    } else if (value == "false" || value == "0") {
      wait = false;
    } else {
      return RequestError{"wait", "must be true or false"};
    }
  }
  return wait;
}

Target split_target(std::string_view target) noexcept {
  // The absolute form ("http://host:port/v1/jobs"), which proxies send, names the same path.
  for (std::string_view scheme : {"http://", "https://"}) {
    if (target.starts_with(scheme)) {
      const auto slash = target.find('/', scheme.size());
      target = slash == std::string_view::npos ? "/" : target.substr(slash);
    }
  }
  const auto q = target.find('?');
  if (q == std::string_view::npos) return {target, {}};
  return {target.substr(0, q), target.substr(q + 1)};
}

std::optional<Duration> header_budget(const HttpRequest& request) {
  JobRequest out;
  if (read_wire_budgets(request, out)) return std::nullopt;
  return out.budget;
}

std::variant<boost::json::value, RequestError> parse_json_body(std::string_view text,
                                                              std::size_t max_json_depth,
                                                              bool index_elements) {
  boost::json::parse_options options;
  options.max_depth = max_json_depth;
  boost::system::error_code ec;
  boost::json::value body = boost::json::parse(text, ec, {}, options);
  if (ec) return RequestError{"body", "is not valid JSON: " + ec.message()};
  if (std::string key = duplicate_key(text, options, index_elements); !key.empty()) {
    return RequestError{std::move(key), "appears more than once in its object"};
  }
  return body;
}

std::optional<RequestError> read_job_fields(const boost::json::object& job, JobRequest& out,
                                            std::chrono::milliseconds max_delay) {
  for (const auto& [key, value] : job) {
    // delay_ms needs the limit, which no other field does.
    if (auto e = key == "delay_ms" ? read_delay_ms(value, max_delay, out)
                                   : read_body_field(key, value, out)) {
      return e;
    }
  }
  if (out.kind.empty()) return RequestError{"kind", "is required"};
  return std::nullopt;
}

std::variant<JobRequest, RequestError> parse_job_request(const HttpRequest& request,
                                                         std::size_t max_json_depth,
                                                         std::chrono::milliseconds max_delay) {
  JobRequest out;
  auto wait = parse_wait_query(split_target(request.target).query, out.wait);
  if (auto* e = std::get_if<RequestError>(&wait)) return std::move(*e);
  out.wait = std::get<bool>(wait);
  if (auto e = read_wire_budgets(request, out)) return *e;

  auto body = parse_json_body(request.body, max_json_depth, /*index_elements=*/false);
  if (auto* e = std::get_if<RequestError>(&body)) return std::move(*e);
  if (!std::get<boost::json::value>(body).is_object()) return RequestError{"body", "must be a JSON object"};
  if (auto e = read_job_fields(std::get<boost::json::value>(body).get_object(), out, max_delay)) {
    return *e;
  }
  // The header form, which a forwarding sandglassd sends. Both forms may be sent, with one key:
  // two different keys would make one of them silently lose, so that is an error naming both.
  if (const auto key = request.header(kIdempotencyKeyHeader)) {
    if (key->empty() || key->size() > kMaxIdempotencyKeyBytes) {
      return RequestError{std::string{kIdempotencyKeyHeader}, "must be 1 to 256 bytes"};
    }
    if (!storable_key(*key)) {
      return RequestError{std::string{kIdempotencyKeyHeader}, "must be UTF-8 text without NUL"};
    }
    if (!out.idempotency_key.empty() && out.idempotency_key != *key) {
      return RequestError{"idempotency_key",
                          "differs from the idempotency-key header; send one key, or the same "
                          "key in both"};
    }
    out.idempotency_key = *key;
  }
  return out;
}

}  // namespace sandglass::daemon
