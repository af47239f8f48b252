#include "cli/watch.hpp"

#include "cli/answers.hpp"
#include "cli/render.hpp"

#include <csignal>
#include <ctime>
#include <iostream>
#include <thread>

#include <unistd.h>

namespace sandglass::cli {
namespace {

// Set by the signal handler, read by the refresh loop.
volatile std::sig_atomic_t g_stop_requested = 0;

extern "C" void request_stop(int) { g_stop_requested = 1; }

// Home the cursor and clear the screen (ANSI).
constexpr std::string_view kClearScreen = "\x1b[H\x1b[2J";
// How often a wait between refreshes looks for Ctrl-C.
constexpr std::chrono::milliseconds kStopCheck{50};

std::string wall_clock_now() {
  const std::time_t t = std::time(nullptr);
  std::tm local{};
  localtime_r(&t, &local);
  char text[16];
  std::strftime(text, sizeof text, "%H:%M:%S", &local);
  return text;
}

void sleep_unless_stopped(std::chrono::milliseconds total) {
  const auto until = std::chrono::steady_clock::now() + total;
  while (g_stop_requested == 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        kStopCheck, until - std::chrono::steady_clock::now()));
  }
}

}  // namespace

ExitCode watch_stats(const DaemonClient& client, const WatchOptions& options) {
  std::signal(SIGINT, request_stop);
  std::signal(SIGTERM, request_stop);
  const bool terminal = isatty(STDOUT_FILENO) == 1 && !options.json;
  ExitCode last = ExitCode::completed;
  std::string unreachable;  // the last refresh's failure to reach the daemon
  for (std::size_t n = 1; g_stop_requested == 0; ++n) {
    if (terminal) std::cout << kClearScreen;
    if (!options.json) {
      std::cout << "sandglassd at " << client.url().text << "   " << wall_clock_now() << "   every "
                << options.interval.count() << " ms"
                << (options.count == 0 ? ", Ctrl-C to stop" : "") << "\n\n";
    }
    try {
      last = show_answer(client.request("GET", "/v1/stats", {}, DaemonClient::Wait::short_answer),
                         options.json, render_stats);
    } catch (const Unreachable& e) {
      std::cout << "UNREACHABLE: " << e.what() << "\n";
      unreachable = e.what();
      last = ExitCode::unreachable;
    }
    std::cout.flush();
    if (options.count != 0 && n >= options.count) break;
    sleep_unless_stopped(options.interval);
  }
  if (g_stop_requested != 0) return ExitCode::completed;
  if (last == ExitCode::unreachable) std::cerr << "sandglass: " << unreachable << "\n";
  return last;
}

}  // namespace sandglass::cli
