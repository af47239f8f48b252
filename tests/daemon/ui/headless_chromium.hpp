// headless_chromium.hpp — a real headless Chromium for tests of the status page, driven over the
// DevTools protocol (a WebSocket, Boost.Beast): open a page, evaluate JavaScript in it, take a
// screenshot. Debian's `chromium`; `find_chromium()` says where it is, if anywhere.
//
//   HeadlessChromium browser;                       // starts it; throws if it cannot
//   browser.navigate("http://127.0.0.1:8080/");
//   browser.wait_for("document.querySelectorAll('#recent tr').length > 0");
//   std::string text = browser.evaluate("document.title").as_string().c_str();
//   browser.screenshot("page.png");
//
// Thread safety: none; one test thread.
#pragma once

#include <boost/json/value.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace sandglass::testing {

// The path of a Chromium binary (chromium, chromium-browser, google-chrome), or nullopt.
std::optional<std::string> find_chromium();

class HeadlessChromium {
 public:
  // Starts the browser with a fresh profile in a temporary folder and a window of
  // width x height, and opens one page. Throws std::runtime_error when it cannot.
  explicit HeadlessChromium(int width = 1280, int height = 1000);
  HeadlessChromium(const HeadlessChromium&) = delete;
  HeadlessChromium& operator=(const HeadlessChromium&) = delete;
  ~HeadlessChromium();  // kills the browser, removes its profile

  // Loads `url` in the page and waits for its load event.
  void navigate(const std::string& url);
  // Evaluates `expression` in the page (awaiting a promise) and returns its value as JSON.
  // Throws std::runtime_error with the page's exception text when it throws.
  boost::json::value evaluate(const std::string& expression);
  // Evaluates `condition` until it is true or `timeout` passed; false on timeout. Blocks.
  bool wait_for(const std::string& condition,
                std::chrono::milliseconds timeout = std::chrono::seconds{20});
  // Writes a PNG of the whole page to `path`.
  void screenshot(const std::string& path);
  // The DevTools events seen so far ("Page.javascriptDialogOpening", ...), in order.
  const std::vector<std::string>& events() const noexcept;
  // What the page logged to its console and the exceptions it threw, one line each.
  const std::vector<std::string>& console() const noexcept;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace sandglass::testing
