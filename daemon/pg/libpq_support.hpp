// libpq_support.hpp — what the `sql` kind and the cluster share of libpq: the parameters a
// connection opens with (our defaults, then the operator's conninfo, then what must hold
// whatever it says), libpq's messages on one line, and poll(2)'s timeout until a deadline.
//
//   const ConnectParams params{{{"keepalives_idle", "30"}}, conninfo, {{"client_encoding", "UTF8"}}};
//   PGconn* c = PQconnectStartParams(params.keys(), params.values(), /*expand_dbname=*/1);
//
// Thread safety: distinct objects: safe; shared objects: unsafe (const use is safe).
#pragma once

#include <sandglass/deadline.hpp>

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace sandglass::daemon::pg {

struct ConnectSetting {
  const char* key;
  const char* value;
};

// Keys and values for PQconnectdbParams / PQconnectStartParams with expand_dbname = 1: libpq
// applies them in order and the last wins, so `defaults` are overridden by what the conninfo
// (a key=value string or a URI, expanded from "dbname") sets, and `fixed` override both.
// `conninfo` must outlive the object.
class ConnectParams {
 public:
  ConnectParams(std::initializer_list<ConnectSetting> defaults, const std::string& conninfo,
                std::initializer_list<ConnectSetting> fixed = {});
  const char* const* keys() const noexcept { return keys_.data(); }
  const char* const* values() const noexcept { return values_.data(); }

 private:
  std::vector<const char*> keys_;    // null-terminated
  std::vector<const char*> values_;  // null-terminated
};

// libpq's messages end with a newline and some span lines, indented with tabs: one line, runs
// of white space as one space.
std::string one_line(std::string_view text);

// poll(2)'s timeout for a wait until `until`: -1 (none) for TimePoint::max(), 0 once it has
// passed, else the milliseconds left rounded up.
int poll_timeout(TimePoint until);

}  // namespace sandglass::daemon::pg
