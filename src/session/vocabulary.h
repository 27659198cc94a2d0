// Session logic is written in the wire format's vocabulary: inside rmsg::session the names
// of rmsg::wire (Seq, NodeId, Cookie, frames) are used unqualified. Every header of
// src/session that includes a wire header includes this one.
#pragma once

namespace rmsg::wire {}

namespace rmsg::session {
using namespace rmsg::wire;  // NOLINT(google-build-using-namespace)
}  // namespace rmsg::session
