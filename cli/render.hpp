// render.hpp — the human-readable forms of what sandglassd answers (`--json` prints the
// daemon's JSON as it came instead):
//
//   job 7 sleep: completed (ok)
//     result     {"slept_ms":100}
//     attempts   2: failed (handler_error), completed (ok)      (a job with a retry or delay)
//     timings    budget 500 ms = intake 0 + queue 0 + run 100 + remaining 394 ms (+ reserve)
//
// Fields a record lacks are left out, and fields this client does not know are ignored, so a
// newer daemon's answers still render.
//
// Thread safety: pure functions.
#pragma once

#include <boost/json/object.hpp>

#include <string>

namespace sandglass::cli {

// A job's record (GET /v1/jobs/{id}), or a submit's {"id", "state": "queued"}.
std::string render_record(const boost::json::object& record);
// GET /v1/jobs: one line per job under a header, then the next page's cursor if there is one.
std::string render_listing(const boost::json::object& listing);
// GET /v1/stats: one screen.
std::string render_stats(const boost::json::object& stats);
// POST /v1/jobs/batch: one line per job, in the batch's order: "job ID: STATE" with the reason
// of a refused one ("-" for the id of a job never inserted), or an item's error and its field.
std::string render_batch(const boost::json::object& answer);

}  // namespace sandglass::cli
