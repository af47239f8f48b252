// sandglass-demo: a short tour of the embedded runtime; prints one line per outcome.
#include <sandglass/sandglass.hpp>

#include <chrono>
#include <cstdio>
#include <latch>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

namespace {

void print(const char* what, const sandglass::Outcome& o) {
  using std::chrono::duration_cast;
  using std::chrono::microseconds;
  std::printf("%-44s state=%-9s reason=%-24s cause=%-8s queue=%6lldus run=%6lldus\n", what,
              sandglass::to_string(o.state).data(), sandglass::to_string(o.reason).data(),
              sandglass::to_string(o.cause).data(),
              static_cast<long long>(duration_cast<microseconds>(o.timings.queue_wait).count()),
              static_cast<long long>(duration_cast<microseconds>(o.timings.run_time).count()));
}

}  // namespace

int main() {
  sandglass::Runtime rt{{.workers = 2, .capacity = 4}};

  auto quick = rt.submit({.kind = "quick", .budget = 100ms}, [](sandglass::JobContext& ctx) {
    ctx.checkpoint();
    ctx.set_result("done");
  });
  print("a quick job", quick.wait());

  auto spinner = rt.submit({.kind = "spin", .budget = 50ms},
                           [](sandglass::JobContext& ctx) { for (;;) ctx.checkpoint(); });
  print("a job that spins past its 50 ms budget", spinner.wait());

  // Occupy both workers, then queue a job whose budget runs out while it waits.
  std::latch started{2};
  std::vector<sandglass::JobHandle> blockers;
  for (int i = 0; i < 2; ++i) {
    blockers.push_back(
        rt.submit({.kind = "block", .budget = 300ms}, [&started](sandglass::JobContext& ctx) {
          started.count_down();
          for (;;) {
            ctx.checkpoint();
            std::this_thread::sleep_for(1ms);
          }
        }));
  }
  started.wait();
  auto waiting = rt.submit({.kind = "quick", .budget = 20ms}, [](sandglass::JobContext&) {});
  print("a job whose 20 ms run out in the queue", waiting.wait());
  auto tiny = rt.submit({.kind = "quick", .budget = 100us}, [](sandglass::JobContext&) {});
  print("a job with a 100 us budget", tiny.wait());

  auto cancelled = rt.submit({.kind = "quick", .budget = 1s}, [](sandglass::JobContext&) {});
  cancelled.cancel();
  print("a queued job its caller cancelled", cancelled.wait());

  for (auto& b : blockers) b.cancel();
  for (auto& b : blockers) print("a blocker its caller cancelled", b.wait());

  rt.shutdown(1s);
  auto late = rt.submit({.kind = "quick"}, [](sandglass::JobContext&) {});
  print("a job submitted after shutdown", late.wait());
}
