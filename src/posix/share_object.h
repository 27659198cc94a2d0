// Taking a reference to the socket object a descriptor number refers to, while another
// thread may be closing that number (dup racing close).
#pragma once

#include <cstdint>

#include "posix/fd_table.h"

namespace rmsg::posix {

// One more reference to the object src refers to, or null. A close of the source number
// racing the dup() may free the object and reuse its place for another socket: the
// reference is taken only while the object is alive (refs > 0) and kept only if src still
// refers to it afterwards; otherwise it is handed to give_back (which drops it, reporting
// and freeing the object if it was the last) and the duplicate stays unmanaged.
//
// between_load_and_ref runs in the window that race lives in; the shim passes an empty
// lambda (inlined away), tests/posix/share_object_test.cc closes and reuses the object there.
template <class BetweenLoadAndRef, class GiveBack>
SocketObject* share_object(const FdTable& table, const FdSlot& src,
                           BetweenLoadAndRef between_load_and_ref, GiveBack give_back) {
  std::uint32_t index = src.object.load(std::memory_order_acquire);
  if (index == 0) return nullptr;
  between_load_and_ref();
  SocketObject* o = table.object_at(index - 1);
  std::int32_t refs = o->refs.load(std::memory_order_acquire);
  do {
    if (refs <= 0) return nullptr;
  } while (!o->refs.compare_exchange_weak(refs, refs + 1, std::memory_order_acq_rel));
  if (src.object.load(std::memory_order_acquire) == index) return o;
  give_back(o);
  return nullptr;
}

}  // namespace rmsg::posix
