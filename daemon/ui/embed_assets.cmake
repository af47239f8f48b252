# Turns the status page's files (index.html, app.css, app.js in UI_DIR) into OUTPUT, a C++ source
# that defines sandglass::daemon::ui_assets() with each file as a raw string literal, so the page
# ships inside sandglassd. Run at build time by daemon/CMakeLists.txt whenever a file changes.
#   cmake -DUI_DIR=daemon/ui -DOUTPUT=build/daemon/ui_assets.cpp -P embed_assets.cmake
include("${CMAKE_CURRENT_LIST_DIR}/../../cmake/embed_text.cmake")
set(names index.html app.css app.js)
sandglass_generated_preamble(body "daemon/ui/ by daemon/ui/embed_assets.cmake")
string(APPEND body "#include \"daemon/ui/ui_assets.hpp\"\n\n#include <array>\n\n")
string(APPEND body "namespace sandglass::daemon {\n\nstd::span<const UiAsset> ui_assets() noexcept {\n")
string(APPEND body "  static constexpr std::array<UiAsset, 3> kAssets{{\n")
foreach(name IN LISTS names)
  sandglass_raw_string(literal "${UI_DIR}/${name}" "sgui")
  string(APPEND body "      {\"${name}\", ${literal}},\n")
endforeach()
string(APPEND body "  }};\n  return kAssets;\n}\n\n}  // namespace sandglass::daemon\n")
sandglass_write_generated("${OUTPUT}" "${body}")
