#include "cli/batch_file.hpp"

#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

namespace sandglass::cli {

std::string read_batch_file(const std::string& path) {
  if (path == "-") {
    std::ostringstream all;
    all << std::cin.rdbuf();
    return all.str();
  }
  std::ifstream in{path, std::ios::binary};
  if (!in) throw BatchFileError{path + ": cannot be read"};
  return {std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
}

std::string batch_body(std::string_view text) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(text, ec);
  if (ec) throw BatchFileError{"the batch is not valid JSON: " + ec.message()};
  if (v.is_array()) return boost::json::serialize(boost::json::object{{"jobs", std::move(v)}});
  const auto* jobs = v.is_object() ? v.get_object().if_contains("jobs") : nullptr;
  if (jobs == nullptr || !jobs->is_array()) {
    throw BatchFileError{R"(the batch must be {"jobs": [...]} or an array of jobs)"};
  }
  return boost::json::serialize(v);
}

}  // namespace sandglass::cli
