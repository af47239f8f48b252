// overrun.hpp — `Overrun`, a running job that has gone on past its deadline: its handler was
// cancelled at the deadline but has not returned (it reaches no checkpoint, or it ignores the
// cancellation), so it holds its worker.
//
//   sandglass::Runtime rt{{.workers = 4, .overrun_after = 500ms,
//                          .on_overrun = [](const sandglass::Overrun& o) noexcept { log(o); }}};
//   for (const sandglass::Overrun& o : rt.overruns()) ...;   // who is stuck right now
//
// A job counts as overrunning once its deadline passed at least `RuntimeOptions::overrun_after`
// ago while it still runs. The runtime's one timer thread reports each such job once to
// `RuntimeOptions::on_overrun` (no thread or OS timer per job); `Runtime::overruns()` lists the
// ones running now.
//
// Thread safety: a value type.
#pragma once

#include <sandglass/deadline.hpp>
#include <sandglass/job_spec.hpp>

#include <cstddef>
#include <functional>
#include <string>

namespace sandglass {

struct Overrun {
  std::size_t worker = 0;     // the index of the worker thread that runs it, from 0
  JobId id = 0;
  std::string kind;
  Deadline deadline;
  TimePoint started_at{};
  Duration past_deadline{};   // how long ago the deadline passed, when this was taken
};

// Called once per overrunning job, on the runtime's timer thread, outside its locks. Must be
// quick and must not block on the runtime.
using OverrunCallback = std::function<void(const Overrun&)>;

}  // namespace sandglass
