// daemon_client.hpp — `DaemonClient`, a small blocking HTTP/1.1 client of sandglassd (Beast,
// hidden in daemon_client.cpp): one request per connection.
//
//   DaemonClient client{url, token};
//   DaemonReply r = client.request("GET", "/v1/jobs/7", {}, DaemonClient::Wait::short_answer);
//
// Time: connecting must succeed within 5 s. An answer the daemon gives at once must arrive
// within 60 s; one that waits for a job (submit --wait, get --wait) has no time limit here,
// since the daemon itself answers by the job's deadline plus its reserve (Ctrl-C stops the
// wait, and a waiting submitter's job is then cancelled by the daemon).
//
// Thread safety: distinct objects: safe; shared objects: unsafe.
#pragma once

#include "cli/daemon_url.hpp"

#include <stdexcept>
#include <string>
#include <string_view>

namespace sandglass::cli {

struct DaemonReply {
  unsigned status = 0;
  std::string body;
};

// The daemon could not be reached, or the connection failed before a whole answer arrived.
class Unreachable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class DaemonClient {
 public:
  enum class Wait { short_answer, until_job_ends };

  // `token`: sent as "Authorization: Bearer TOKEN" unless empty.
  DaemonClient(DaemonUrl url, std::string token) : url_{std::move(url)}, token_{std::move(token)} {}

  // Blocks until the answer. Throws Unreachable.
  DaemonReply request(std::string_view method, std::string_view target, std::string_view body,
                      Wait wait) const;

  const DaemonUrl& url() const noexcept { return url_; }

 private:
  DaemonUrl url_;
  std::string token_;
};

}  // namespace sandglass::cli
