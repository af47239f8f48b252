// temp_files.hpp — files in the temporary folder for the tests that start processes.
#pragma once

#include <string>

namespace sandglass::testing {

// A fresh path in the temporary folder, unique in this process, ending in `name_hint`.
std::string temp_path(const std::string& name_hint);
// The whole content of a file ("" if it cannot be read).
std::string slurp(const std::string& path);

}  // namespace sandglass::testing
