#include "ui/headless_chromium.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/detail/base64.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/websocket/stream.hpp>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value_to.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace sandglass::testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
namespace json = boost::json;
namespace fs = std::filesystem;

std::optional<std::string> find_chromium() {
  for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome",
                        "/usr/bin/google-chrome-stable"}) {
    if (::access(p, X_OK) == 0) return std::string{p};
  }
  return std::nullopt;
}

class HeadlessChromium::Impl {
 public:
  Impl(int width, int height) : width_{width}, height_{height} {
    const auto binary = find_chromium();
    if (!binary) throw std::runtime_error{"no chromium binary found"};
    std::string profile_template = (fs::temp_directory_path() / "sandglass-chromium-XXXXXX").string();
    if (::mkdtemp(profile_template.data()) == nullptr) throw std::runtime_error{"mkdtemp failed"};
    profile_ = profile_template;
    log_path_ = (fs::path{profile_} / "chromium.log").string();
    spawn(*binary);
    connect(devtools_url());
    const json::value target =
        call("Target.createTarget", {{"url", "about:blank"}}, {}).at("targetId");
    session_ = json::value_to<std::string>(
        call("Target.attachToTarget", {{"targetId", target}, {"flatten", true}}, {}).at("sessionId"));
    call("Page.enable", {});
    call("Runtime.enable", {});
    set_size(height_);
  }

  ~Impl() {
    if (ws_) {
      beast::error_code ec;
      beast::get_lowest_layer(*ws_).socket().close(ec);
    }
    if (pid_ > 0) {
      ::kill(-pid_, SIGKILL);  // the browser's process group: it and its helpers
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    std::error_code ec;
    fs::remove_all(profile_, ec);
  }

  json::object call(const std::string& method, json::object params) { return call(method, std::move(params), session_); }

  json::object call(const std::string& method, json::object params, const std::string& session) {
    const std::int64_t id = ++next_id_;
    json::object message{{"id", id}, {"method", method}, {"params", std::move(params)}};
    if (!session.empty()) message["sessionId"] = session;
    ws_->write(asio::buffer(json::serialize(message)));
    for (;;) {
      beast::flat_buffer buffer;
      ws_->read(buffer);
      json::value v = json::parse(beast::buffers_to_string(buffer.data()));
      json::object& o = v.as_object();
      if (const auto* m = o.if_contains("method")) {
        note_event(json::value_to<std::string>(*m), o);
        continue;
      }
      if (const auto* got = o.if_contains("id"); got == nullptr || got->to_number<std::int64_t>() != id) continue;
      if (const auto* error = o.if_contains("error")) {
        throw std::runtime_error{method + " failed: " + json::serialize(*error)};
      }
      return o.at("result").as_object();
    }
  }

  void set_size(int height) {
    call("Emulation.setDeviceMetricsOverride",
         {{"width", width_}, {"height", height}, {"deviceScaleFactor", 1}, {"mobile", false}});
  }

  std::vector<std::string> events_;
  std::vector<std::string> console_;
  int width_, height_;

 private:
  void spawn(const std::string& binary) {
    std::vector<std::string> args{binary,
                                  "--headless",
                                  "--no-sandbox",
                                  "--disable-gpu",
                                  "--disable-background-networking",
                                  "--disable-component-update",
                                  "--disable-sync",
                                  "--disable-extensions",
                                  "--disable-default-apps",
                                  "--no-first-run",
                                  "--no-default-browser-check",
                                  "--mute-audio",
                                  "--hide-scrollbars",
                                  "--user-data-dir=" + profile_,
                                  "--remote-debugging-address=127.0.0.1",
                                  "--remote-debugging-port=0",
                                  "--window-size=" + std::to_string(width_) + "," + std::to_string(height_),
                                  "about:blank"};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    const int rc = ::posix_spawn(&pid_, binary.c_str(), &actions, &attr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
      pid_ = -1;
      throw std::runtime_error{"could not start " + binary};
    }
  }

  // The browser prints "DevTools listening on ws://127.0.0.1:PORT/devtools/browser/ID".
  std::string devtools_url() const {
    const std::string marker = "DevTools listening on ";
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds{60};
    std::string log;
    while (std::chrono::steady_clock::now() < until) {
      std::ifstream in{log_path_};
      std::stringstream s;
      s << in.rdbuf();
      log = s.str();
      if (const auto at = log.find(marker); at != std::string::npos) {
        const auto end = log.find('\n', at);
        if (end != std::string::npos) return log.substr(at + marker.size(), end - at - marker.size());
      }
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        throw std::runtime_error{"chromium exited at start-up: " + log};
      }
      std::this_thread::sleep_for(std::chrono::milliseconds{20});
    }
    throw std::runtime_error{"chromium did not report its DevTools address: " + log};
  }

  void connect(const std::string& url) {
    // ws://127.0.0.1:PORT/devtools/browser/ID
    const std::string rest = url.substr(std::string{"ws://"}.size());
    const auto slash = rest.find('/');
    const std::string host_port = rest.substr(0, slash);
    const auto colon = host_port.rfind(':');
    ws_ = std::make_unique<websocket::stream<beast::tcp_stream>>(io_);
    asio::ip::tcp::endpoint endpoint{asio::ip::make_address(host_port.substr(0, colon)),
                                     static_cast<unsigned short>(std::stoi(host_port.substr(colon + 1)))};
    beast::get_lowest_layer(*ws_).connect(endpoint);
    // A hung browser fails the read instead of hanging the test.
    timeval tv{.tv_sec = 60, .tv_usec = 0};
    ::setsockopt(beast::get_lowest_layer(*ws_).socket().native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv,
                 sizeof tv);
    ws_->read_message_max(64 << 20);
    ws_->text(true);
    ws_->handshake(host_port, rest.substr(slash));
  }

  void note_event(const std::string& method, const json::object& o) {
    events_.push_back(method);
    if (events_.size() > 10'000) events_.erase(events_.begin(), events_.begin() + 5'000);
    const json::value* params = o.if_contains("params");
    if (params == nullptr) return;
    if (method == "Runtime.consoleAPICalled") {
      std::string line = json::value_to<std::string>(params->at("type")) + ":";
      for (const json::value& a : params->at("args").as_array()) {
        // Appended piece by piece: `" " + std::string` trips GCC 12's false -Wrestrict at -O3.
        if (const auto* v = a.as_object().if_contains("value")) {
          line += ' ';
          line += json::serialize(*v);
        }
      }
      console_.push_back(line);
    } else if (method == "Runtime.exceptionThrown") {
      console_.push_back("exception: " + json::serialize(params->at("exceptionDetails")));
    } else if (method == "Page.javascriptDialogOpening") {
      console_.push_back("dialog: " + json::serialize(*params));
    }
  }

  asio::io_context io_;
  std::unique_ptr<websocket::stream<beast::tcp_stream>> ws_;
  std::string profile_;
  std::string log_path_;
  std::string session_;
  pid_t pid_ = -1;
  std::int64_t next_id_ = 0;
};

HeadlessChromium::HeadlessChromium(int width, int height)
    : impl_{std::make_unique<Impl>(width, height)} {}
HeadlessChromium::~HeadlessChromium() = default;

void HeadlessChromium::navigate(const std::string& url) {
  impl_->call("Page.navigate", {{"url", url}});
  if (!wait_for("document.readyState === 'complete' && location.href === " + json::serialize(json::string{url}))) {
    throw std::runtime_error{"the page did not load: " + url + " (at " +
                             json::serialize(evaluate("[location.href, document.readyState]")) + ")"};
  }
}

json::value HeadlessChromium::evaluate(const std::string& expression) {
  const json::object r = impl_->call(
      "Runtime.evaluate", {{"expression", expression}, {"returnByValue", true}, {"awaitPromise", true}});
  if (const auto* e = r.if_contains("exceptionDetails")) {
    throw std::runtime_error{"the page threw: " + json::serialize(*e)};
  }
  const json::object& result = r.at("result").as_object();
  if (const auto* v = result.if_contains("value")) return *v;
  return nullptr;  // undefined
}

bool HeadlessChromium::wait_for(const std::string& condition, std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const json::value v = evaluate("!!(" + condition + ")");
    if (v.is_bool() && v.as_bool()) return true;
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds{50});
  }
}

void HeadlessChromium::screenshot(const std::string& path) {
  const json::object metrics = impl_->call("Page.getLayoutMetrics", {});
  const double height = metrics.at("cssContentSize").at("height").to_number<double>();
  impl_->set_size(std::max(impl_->height_, static_cast<int>(height + 0.5)));
  const json::object shot = impl_->call("Page.captureScreenshot", {{"format", "png"}});
  impl_->set_size(impl_->height_);
  const std::string b64 = json::value_to<std::string>(shot.at("data"));
  std::string png(beast::detail::base64::decoded_size(b64.size()), '\0');
  png.resize(beast::detail::base64::decode(png.data(), b64.data(), b64.size()).first);
  std::ofstream out{path, std::ios::binary | std::ios::trunc};
  out.write(png.data(), static_cast<std::streamsize>(png.size()));
  if (!out) throw std::runtime_error{"could not write " + path};
}

const std::vector<std::string>& HeadlessChromium::events() const noexcept { return impl_->events_; }
const std::vector<std::string>& HeadlessChromium::console() const noexcept { return impl_->console_; }

}  // namespace sandglass::testing
