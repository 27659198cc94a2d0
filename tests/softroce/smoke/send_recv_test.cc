// rdma_cm to the guest's own NIC address, server and client in one thread on one
// non-blocking event channel: 1,000 checked SEND/RECV ping-pongs on an RC QP, and a
// prompt REJECTED from a port where nothing listens.
#include <gtest/gtest.h>

#include <cstdio>

#include "softroce/smoke/cm_events.h"
#include "softroce/smoke/ping_pong.h"
#include "softroce/smoke/rc_conn.h"

namespace rmsg::softroce {
namespace {

using namespace std::chrono_literals;

constexpr std::uint16_t kPort = 18515;
constexpr std::uint16_t kNoListenerPort = 18516;
constexpr std::uint32_t kMessages = 1000;

TEST(SoftRoceSendRecv, ThousandCheckedMessagesOverRcToOwnNicAddress) {
  auto addr = ipv4(guest_addr(), kPort);
  ASSERT_TRUE(addr) << "RMSG_RDMA_ADDR='" << guest_addr() << "': run me with tests/softroce/run";
  EventChannel ch;
  ASSERT_TRUE(ch.ok());
  RcEndpoint server_ep, client_ep;  // outlive the connections (and the QPs they own)
  ServerConn server(ch, server_ep);
  ClientConn client(ch, client_ep);
  ASSERT_TRUE(server.listen(*addr));

  auto start = SteadyClock::now();
  ASSERT_TRUE(client.start(*addr));
  auto deadline = deadline_in(30s);
  while (!client.established || !server.established) {
    auto ev = next_event(ch, deadline);
    ASSERT_TRUE(ev) << "no connection within 30 s";
    ASSERT_TRUE(ev->id == client.id() ? client.on_event(*ev) : server.on_event(*ev));
    ASSERT_FALSE(client.failed) << "client: " << describe(client.last_failure);
  }
  std::printf("connected in %.1f ms\n", ms_since(start));

  start = SteadyClock::now();
  ASSERT_TRUE(ping_pong(&client_ep, &server_ep, kMessages, deadline_in(60s)));
  std::printf("%u ping-pongs in %.1f ms\n", kMessages, ms_since(start));
  EXPECT_EQ(client_ep.received(), kMessages);
  EXPECT_EQ(server_ep.received(), kMessages);

  ASSERT_TRUE(client.disconnect());
  deadline = deadline_in(10s);
  while (!client.disconnected || !server.disconnected) {
    auto ev = next_event(ch, deadline);
    ASSERT_TRUE(ev) << "no DISCONNECTED within 10 s";
    ASSERT_TRUE(ev->id == client.id() ? client.on_event(*ev) : server.on_event(*ev));
  }
}

TEST(SoftRoceSendRecv, ConnectingToAPortWithoutListenerIsRejectedPromptly) {
  auto addr = ipv4(guest_addr(), kNoListenerPort);
  ASSERT_TRUE(addr) << "RMSG_RDMA_ADDR='" << guest_addr() << "': run me with tests/softroce/run";
  EventChannel ch;
  ASSERT_TRUE(ch.ok());
  RcEndpoint ep;
  ClientConn client(ch, ep);
  auto start = SteadyClock::now();
  ASSERT_TRUE(client.start(*addr));
  auto deadline = deadline_in(10s);
  while (!client.failed) {
    auto ev = next_event(ch, deadline);
    ASSERT_TRUE(ev) << "neither connected nor rejected within 10 s";
    ASSERT_TRUE(client.on_event(*ev));
    ASSERT_FALSE(client.established) << "connected to a port where nothing listens";
  }
  double ms = ms_since(start);
  std::printf("%s after %.1f ms\n", describe(client.last_failure).c_str(), ms);
  EXPECT_EQ(client.last_failure.type, RDMA_CM_EVENT_REJECTED);
  // Promptly: a reject message, not a timeout (the CM's own timeouts run to seconds).
  EXPECT_LT(ms, 2000.0);
}

}  // namespace
}  // namespace rmsg::softroce
