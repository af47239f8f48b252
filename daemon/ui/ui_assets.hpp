// ui_assets.hpp (private) — the status page's files (index.html, app.css, app.js), embedded in
// the binary at build time: ui_assets.cpp is generated from daemon/ui/ by embed_assets.cmake.
//
// Thread safety: immutable data.
#pragma once

#include <span>
#include <string_view>

namespace sandglass::daemon {

struct UiAsset {
  std::string_view name;  // the file's name in daemon/ui/, e.g. "app.js"
  std::string_view body;
};

std::span<const UiAsset> ui_assets() noexcept;

}  // namespace sandglass::daemon
