#include "temp_files.hpp"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace sandglass::testing {

std::string temp_path(const std::string& name_hint) {
  static std::atomic<int> counter{0};
  return (std::filesystem::temp_directory_path() /
          ("sandglassd-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" +
           name_hint))
      .string();
}

std::string slurp(const std::string& path) {
  std::ifstream in{path};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace sandglass::testing
