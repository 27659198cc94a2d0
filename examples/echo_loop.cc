// The smallest rmsg program: an EventLoop with a timer and a cross-thread post.
// Built by tests/install against the *installed* rmsg (CMake package and pkg-config),
// which proves that the install is usable by a third-party project.
#include <rmsg/event_loop.h>
#include <rmsg/result.h>

#include <chrono>
#include <cstdio>
#include <thread>

int main() {
  auto loop = rmsg::EventLoop::create();
  if (!loop) {
    std::fprintf(stderr, "event loop: %s\n", loop.error().message().c_str());
    return 1;
  }
  int events = 0;
  (*loop)->add_timer(std::chrono::milliseconds(1), [&] { ++events; });
  std::thread other([&] { (*loop)->post([&] { ++events; }); });
  const bool done = (*loop)->run_for([&] { return events == 2; }, std::chrono::seconds(5));
  other.join();
  std::printf("rmsg example: %s\n", done ? "ok" : "timed out");
  return done ? 0 : 1;
}
