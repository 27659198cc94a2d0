#include "posix/real.h"

#include <dlfcn.h>

namespace rmsg::posix {

RealCalls g_real;
bool g_real_resolved = false;

void resolve_real_calls() {
  RealCalls calls;
  // dlsym returns void*; the cast to a function pointer is what POSIX prescribes for it.
#define RMSG_POSIX_REAL_RESOLVE(name, ret, params) \
  calls.name = reinterpret_cast<ret(*) params>(dlsym(RTLD_NEXT, #name));
  RMSG_POSIX_REAL_CALLS(RMSG_POSIX_REAL_RESOLVE)
#undef RMSG_POSIX_REAL_RESOLVE
  g_real = calls;
  __atomic_store_n(&g_real_resolved, true, __ATOMIC_RELEASE);
}

}  // namespace rmsg::posix
