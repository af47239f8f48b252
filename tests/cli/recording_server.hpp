// recording_server.hpp — a stand-in for sandglassd that records the one request it gets and
// answers it with a canned response: to see exactly what `sandglass` sends, whatever fields the
// real daemon knows.
//
//   RecordingServer server{400, R"({"error":"is not a known field","field":"delay_ms"})"};
//   run_cli({"--url", url_of(server.port()), "submit", ...});
//   server.request()   // the request line, headers and body as sent
//
// Thread safety: request() from the thread that made the server, after the client is done.
#pragma once

#include <cstdint>
#include <string>
#include <thread>

namespace sandglass::testing {

class RecordingServer {
 public:
  RecordingServer(int status, std::string body);  // listens on 127.0.0.1, an ephemeral port
  RecordingServer(const RecordingServer&) = delete;
  RecordingServer& operator=(const RecordingServer&) = delete;
  ~RecordingServer();

  std::uint16_t port() const noexcept { return port_; }
  // Blocks until the request was read whole and answered.
  const std::string& request();
  // The request's body (after the blank line).
  std::string body();

 private:
  void serve(int status, std::string answer_body);

  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::string request_;  // written by the thread, read after joining it
  std::thread thread_;
};

}  // namespace sandglass::testing
