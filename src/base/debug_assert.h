// RMSG_DEBUG_ASSERT: an internal invariant, checked in debug builds (NDEBUG unset) only.
// For rmsg's own bookkeeping, never for what a peer or a caller sends: those are errors
// returned as values. A failed check logs the condition and aborts: the state is already
// corrupt, and going on would hand out memory twice.
#pragma once

#include <cstdio>
#include <cstdlib>

#ifdef NDEBUG
#define RMSG_DEBUG_ASSERT(cond) static_cast<void>(0)
#else
#define RMSG_DEBUG_ASSERT(cond)                                                                \
  ((cond) ? static_cast<void>(0)                                                               \
          : (std::fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond), \
             std::abort()))
#endif
