// status_page.hpp (private) — the answers for the status page's paths:
//
//   GET /, GET /ui, GET /ui/    the page (index.html)
//   GET /ui/app.css             its style sheet
//   GET /ui/app.js              its script
//
// The page holds no data: it fetches /v1/stats and /v1/jobs, which follow the daemon's auth
// rule, so its own paths need no token (a browser cannot send one on navigation; the page asks
// for it and sends it as a header). Every answer carries a Content-Security-Policy that allows
// only the daemon's own origin (`default-src 'self'`, so no inline script or style, no
// framing), X-Content-Type-Options: nosniff and Referrer-Policy: no-referrer.
//
// Thread safety: pure functions.
#pragma once

#include "daemon/http/http_message.hpp"

#include <optional>
#include <string_view>

namespace sandglass::daemon {

inline constexpr std::string_view kStatusPagePolicy =
    "default-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

// True for the page's paths.
bool is_status_page_path(std::string_view path) noexcept;
// The answer for one of the page's paths (405 for a method other than GET).
HttpResponse status_page_response(std::string_view path, std::string_view method);

}  // namespace sandglass::daemon
