// The bytes this process has allocated and not freed, for tests that bound what a peer can
// make a node keep: glibc's mallinfo2 (small blocks and mmapped ones), or under a sanitizer,
// whose allocator replaces malloc and leaves mallinfo2 at zero, the sanitizer's own count.
#pragma once

#include <malloc.h>

#include <cstddef>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
// The sanitizer runtime's (sanitizer/allocator_interface.h, not installed with GCC here).
extern "C" std::size_t __sanitizer_get_current_allocated_bytes();
#endif

namespace rmsg::testing {

inline std::size_t heap_in_use() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return __sanitizer_get_current_allocated_bytes();
#else
  const auto m = mallinfo2();
  return m.uordblks + m.hblkhd;  // large blocks are mmapped: hblkhd
#endif
}

}  // namespace rmsg::testing
