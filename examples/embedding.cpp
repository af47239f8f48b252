#include <sandglass/sandglass.hpp>

#include <cstdio>

using namespace std::chrono_literals;

int main() {
  sandglass::Runtime rt{{.workers = 2, .capacity = 64}};
  auto h = rt.submit({.kind = "resize", .priority = sandglass::Priority::normal, .budget = 50ms},
                     [](sandglass::JobContext& ctx) { for (;;) ctx.checkpoint(); });
  sandglass::Outcome o = h.wait();            // returns soon after 50 ms
  // o.state == sandglass::State::cancelled, o.cause == sandglass::CancelCause::deadline
  std::printf("state=%s reason=%s cause=%s\n", sandglass::to_string(o.state).data(),
              sandglass::to_string(o.reason).data(), sandglass::to_string(o.cause).data());
  rt.shutdown(1s);
  return o.state == sandglass::State::cancelled && o.cause == sandglass::CancelCause::deadline ? 0 : 1;
}
