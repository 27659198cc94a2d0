// The messenger is written in the vocabulary of the layers below it: inside rmsg::msg the
// wire format's names (rmsg::wire: frames, banner, hello, CRC32C) are used unqualified.
// Every header of src/msg that includes a wire header includes this one after it; the
// layers below never see rmsg::msg.
#pragma once

namespace rmsg::wire {}

namespace rmsg::msg {
using namespace rmsg::wire;  // NOLINT(google-build-using-namespace)
}  // namespace rmsg::msg
