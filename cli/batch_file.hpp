// batch_file.hpp — the body of `sandglass submit-batch FILE`: a JSON file (or `-`, stdin) that
// holds `{"jobs": [...]}` or a bare array of jobs, as POST /v1/jobs/batch takes it.
//
//   const std::string body = batch_body(read_batch_file("jobs.json"));  // {"jobs":[...]}
//
// Only the shape is checked here; each job's fields are the daemon's to check (its 400 names
// `jobs[i].field`).
//
// Thread safety: pure functions, except that reading "-" reads stdin.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace sandglass::cli {

// A batch file that cannot be read or is not a batch; the message names the file.
class BatchFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The whole text of `path`, or of stdin for "-". Throws BatchFileError.
std::string read_batch_file(const std::string& path);

// `text` as the request body {"jobs": [...]}: an object with a "jobs" array is sent as it is, a
// bare array is wrapped. Throws BatchFileError for anything else.
std::string batch_body(std::string_view text);

}  // namespace sandglass::cli
