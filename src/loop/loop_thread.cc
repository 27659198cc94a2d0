#include "loop/loop_thread.h"

#include <cstdio>
#include <cstdlib>

namespace rmsg::loop {

void loop_thread_violation(const char* function, const char* file, int line) noexcept {
  std::fprintf(stderr,
               "rmsg: %s (%s:%d) is loop-thread-only and ran on another thread while the "
               "loop runs\n",
               function, file, line);
  std::abort();
}

}  // namespace rmsg::loop
