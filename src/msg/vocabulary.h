// The messenger is written in the vocabulary of the layers below it: inside rmsg::msg the
// names of the wire format (rmsg::wire: frames, banner, hello, CRC32C) and of the session
// logic (rmsg::session: OutQueue, InState, Reassembler, decide()) are used unqualified.
// Every file of src/msg that includes a wire or session header includes this one; the
// layers below never see rmsg::msg.
#pragma once

namespace rmsg::wire {}
namespace rmsg::session {}

namespace rmsg::msg {
using namespace rmsg::wire;     // NOLINT(google-build-using-namespace)
using namespace rmsg::session;  // NOLINT(google-build-using-namespace)
}  // namespace rmsg::msg
