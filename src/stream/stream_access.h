// StreamAccess: the transports' internal way from a Stream handle to the StreamImpl behind
// it (an RDMA stream's info and counters, internal test seams). Not installed: Stream's
// public API has no such accessor.
//
// Threading: as the Stream (its loop's thread).
#pragma once

#include "rmsg/stream.h"

namespace rmsg {

// A member of Stream, so it reaches the handle's implementation without a friend in the
// public header.
class Stream::Access {
 public:
  // The implementation behind `stream`, or null for an empty handle.
  static StreamImpl* impl(const Stream& stream) noexcept { return stream.impl_.get(); }
  // The implementation as transport type T, or null when it is another transport.
  template <class T>
  static T* as(const Stream& stream) noexcept {
    return dynamic_cast<T*>(stream.impl_.get());
  }
};

namespace detail {
using StreamAccess = Stream::Access;
}  // namespace detail

}  // namespace rmsg
