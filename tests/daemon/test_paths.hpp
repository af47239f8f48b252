// test_paths.hpp — where the tests find the binaries they start and the files of the source tree.
// Defined in test_paths.cpp, which CMake generates into the build folder (tests/CMakeLists.txt):
// no other test source carries a build's absolute paths, so ccache shares their objects between
// clones of the repository.
#pragma once

#include <string>

namespace sandglass::testing {

extern const char* const kSandglassdPath;   // the sandglassd binary of this build
extern const char* const kSandglassCliPath;  // the sandglass binary of this build
extern const char* const kSourceDir;         // the source tree's root

// `relative` (no leading slash) under the source tree's root.
inline std::string source_path(const std::string& relative) {
  return std::string{kSourceDir} + "/" + relative;
}

}  // namespace sandglass::testing
