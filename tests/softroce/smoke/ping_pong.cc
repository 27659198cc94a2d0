#include "softroce/smoke/ping_pong.h"

namespace rmsg::softroce {

using ::testing::AssertionFailure;
using ::testing::AssertionResult;
using ::testing::AssertionSuccess;

namespace {
bool side_done(const RcEndpoint* ep, std::uint32_t count) {
  return !ep || (ep->received() == count && ep->sends_outstanding() == 0);
}
}  // namespace

AssertionResult ping_pong(RcEndpoint* client, RcEndpoint* server, std::uint32_t count,
                          Deadline deadline) {
  if (client && count > 0) {
    if (auto r = client->send(0, 0); !r) return r;
  }
  auto answer = [&](std::uint32_t seq) { return server->send(seq, 1); };
  auto next = [&](std::uint32_t seq) {
    return seq + 1 < count ? client->send(seq + 1, 0) : AssertionSuccess();
  };
  while (!side_done(client, count) || !side_done(server, count)) {
    if (server) {
      if (auto r = server->poll(0, answer); !r)
        return AssertionFailure() << "server: " << r.message();
    }
    if (client) {
      if (auto r = client->poll(1, next); !r)
        return AssertionFailure() << "client: " << r.message();
    }
    if (SteadyClock::now() > deadline) {
      return AssertionFailure() << "ping-pong timed out: client got "
                                << (client ? client->received() : 0) << ", server got "
                                << (server ? server->received() : 0) << " of " << count;
    }
  }
  return AssertionSuccess();
}

}  // namespace rmsg::softroce
