// A checked ping-pong over connected RcEndpoints: the client sends message i, the server
// checks it and answers with message i, the client checks the answer and sends i + 1.
// Either side may be null: in two-host tests each process drives its own side.
#pragma once

#include <cstdint>

#include "softroce/smoke/cm_events.h"
#include "softroce/smoke/rc_endpoint.h"

namespace rmsg::softroce {

// Busy-polls the CQs until both sides have exchanged `count` messages each way and every
// send has completed, or the deadline passes.
::testing::AssertionResult ping_pong(RcEndpoint* client, RcEndpoint* server, std::uint32_t count,
                                     Deadline deadline);

}  // namespace rmsg::softroce
