#include "daemon/ui/status_page.hpp"

#include "daemon/ui/ui_assets.hpp"

#include <string>

namespace sandglass::daemon {
namespace {

struct Route {
  std::string_view path;
  std::string_view asset;
  std::string_view content_type;
};

constexpr Route kRoutes[] = {
    {"/", "index.html", "text/html; charset=utf-8"},
    {"/ui", "index.html", "text/html; charset=utf-8"},
    {"/ui/", "index.html", "text/html; charset=utf-8"},
    {"/ui/app.css", "app.css", "text/css; charset=utf-8"},
    {"/ui/app.js", "app.js", "text/javascript; charset=utf-8"},
};

const Route* route_of(std::string_view path) noexcept {
  for (const Route& r : kRoutes) {
    if (r.path == path) return &r;
  }
  return nullptr;
}

void add_security_headers(HttpResponse& r) {
  r.headers.emplace_back("Content-Security-Policy", std::string{kStatusPagePolicy});
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  r.headers.emplace_back("Referrer-Policy", "no-referrer");
  r.headers.emplace_back("Cache-Control", "no-cache");
}

}  // namespace

bool is_status_page_path(std::string_view path) noexcept { return route_of(path) != nullptr; }

HttpResponse status_page_response(std::string_view path, std::string_view method) {
  HttpResponse r;
  const Route* route = route_of(path);
  if (route == nullptr) {
    r = {.status = 404, .content_type = "text/plain; charset=utf-8", .body = "no such page\n"};
  } else if (method != "GET") {
    r = {.status = 405, .content_type = "text/plain; charset=utf-8", .body = "method not allowed\n"};
    r.headers.emplace_back("Allow", "GET");
  } else {
    r.content_type = std::string{route->content_type};
    for (const UiAsset& a : ui_assets()) {
      if (a.name == route->asset) r.body = std::string{a.body};
    }
  }
  add_security_headers(r);
  return r;
}

}  // namespace sandglass::daemon
