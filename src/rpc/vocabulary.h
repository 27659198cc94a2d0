// RPC is written in the vocabulary of the layers below it: inside rmsg::rpc the names of
// the wire format (rmsg::wire: RpcHeader, RpcKind, the budget codec) and of the session
// logic (rmsg::session: PayloadPool) are used unqualified. Every file of src/rpc that
// names them includes this one; the layers below never see rmsg::rpc.
#pragma once

namespace rmsg::wire {}
namespace rmsg::session {}

namespace rmsg::rpc {
using namespace rmsg::wire;     // NOLINT(google-build-using-namespace)
using namespace rmsg::session;  // NOLINT(google-build-using-namespace)
}  // namespace rmsg::rpc
