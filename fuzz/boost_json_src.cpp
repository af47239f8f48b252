// Boost.JSON compiled from source into the fuzz build (see daemon/CMakeLists.txt), so
// that libFuzzer's coverage instrumentation reaches the JSON parser.
#include <boost/json/src.hpp>
