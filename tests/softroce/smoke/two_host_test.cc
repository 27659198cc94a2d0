// The same checked exchange as send_recv_test, across two guests ("hosts") whose NICs
// are linked by qemu's UDP socket netdev: run by `tests/softroce/run --two-host`, which
// starts this binary in both guests with RMSG_RDMA_ROLE=server|client.
#include <gtest/gtest.h>

#include <cstdio>

#include "softroce/smoke/cm_events.h"
#include "softroce/smoke/ping_pong.h"
#include "softroce/smoke/rc_conn.h"

namespace rmsg::softroce {
namespace {

using namespace std::chrono_literals;

constexpr std::uint16_t kPort = 18518;
constexpr std::uint32_t kMessages = 1000;
// The guests boot side by side; the client retries until the server listens.
constexpr auto kConnectWindow = 180s;

TEST(SoftRoceTwoHosts, ThousandCheckedMessagesBetweenTwoGuests) {
  const std::string role = env_or_empty("RMSG_RDMA_ROLE");
  ASSERT_TRUE(role == "server" || role == "client")
      << "RMSG_RDMA_ROLE='" << role << "': run me with tests/softroce/run --two-host";
  const bool server = role == "server";
  auto addr = ipv4(server ? guest_addr() : env_or_empty("RMSG_RDMA_PEER_ADDR"), kPort);
  ASSERT_TRUE(addr) << "no server address";
  EventChannel ch;
  ASSERT_TRUE(ch.ok());
  RcEndpoint ep;
  ServerConn srv(ch, ep);
  ClientConn cli(ch, ep);
  auto connected = [&] { return server ? srv.established : cli.established; };
  auto handle = [&](const CmEvent& ev) { return server ? srv.on_event(ev) : cli.on_event(ev); };

  auto start = SteadyClock::now();
  int attempts = 0;
  if (server) {
    ASSERT_TRUE(srv.listen(*addr));
  } else {
    ASSERT_TRUE(cli.start(*addr));
    ++attempts;
  }
  auto deadline = deadline_in(kConnectWindow);
  while (!connected()) {
    auto ev = next_event(ch, deadline);
    ASSERT_TRUE(ev) << "no connection within " << kConnectWindow.count() << " s";
    ASSERT_TRUE(handle(*ev));
    if (!server && cli.failed) {  // not up or not listening yet: a new id, at once
      ASSERT_TRUE(cli.start(*addr));
      ++attempts;
    }
  }
  std::printf("%s: connected after %.1f ms (%d attempts)\n", role.c_str(), ms_since(start),
              attempts);

  start = SteadyClock::now();
  ASSERT_TRUE(
      ping_pong(server ? nullptr : &ep, server ? &ep : nullptr, kMessages, deadline_in(60s)));
  std::printf("%s: %u ping-pongs in %.1f ms\n", role.c_str(), kMessages, ms_since(start));
  EXPECT_EQ(ep.received(), kMessages);

  // The client closes; the server waits for that, so neither guest leaves early.
  if (!server) {
    ASSERT_TRUE(cli.disconnect());
  }
  deadline = deadline_in(30s);
  while (!(server ? srv.disconnected : cli.disconnected)) {
    auto ev = next_event(ch, deadline);
    ASSERT_TRUE(ev) << "no DISCONNECTED within 30 s";
    ASSERT_TRUE(handle(*ev));
  }
}

}  // namespace
}  // namespace rmsg::softroce
