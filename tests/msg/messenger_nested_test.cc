// A dispatch callback that runs the loop itself (RPC handlers may): reads of other
// connections inside it must not overwrite the bytes the outer read is still decoding.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <vector>

#include "rmsg/messenger.h"

namespace rmsg {
namespace {

using namespace std::chrono_literals;

constexpr NodeId kServer = 2;
constexpr std::size_t kLen = 3000;

std::vector<std::byte> filled(NodeId from, int index) {
  return std::vector<std::byte>(kLen, static_cast<std::byte>(from * 16 + index));
}

TEST(MessengerNested, DispatchThatRunsTheLoopKeepsTheOuterReadIntact) {
  auto l = EventLoop::create();
  ASSERT_TRUE(l.ok());
  EventLoop& loop = **l;
  ConnectionParams tcp;
  tcp.transport = Transport::tcp;

  std::map<NodeId, std::vector<int>> got;  // per sender, the indices that arrived intact
  int bad = 0;
  int nested = 0;
  int faults = 0;  // server-side session events other than connected
  std::unique_ptr<Messenger> server;
  MessengerOptions so;
  so.node_id = kServer;
  auto s = Messenger::create(
      loop, so,
      [&](NodeId from, std::span<const std::byte> p) {
        const int index = p.empty() ? -1 : static_cast<int>(std::to_integer<unsigned>(p[0]) % 16);
        const auto want = filled(from, index);
        if (p.size() != kLen || !std::equal(p.begin(), p.end(), want.begin())) {
          ++bad;
          return;
        }
        got[from].push_back(index);
        // The first message of the burst (index 1) waits, inside this dispatch, for the other
        // client's burst: its connection is read while this read's later frames wait.
        if (index == 1 && nested == 0) {
          ++nested;
          const NodeId other = from == 1 ? 3 : 1;
          loop.run_for([&] { return got[other].size() >= 3; }, 10s);
        }
      },
      [&](SessionEvent e) { faults += e.kind != SessionEvent::Kind::connected; });
  ASSERT_TRUE(s.ok());
  server = std::move(s).value();
  auto bound = server->listen(SocketAddress::from_host_port("127.0.0.1", 0).value(), tcp);
  ASSERT_TRUE(bound.ok());
  ConnectionParams to_server = tcp;
  to_server.peer = SocketAddress::parse(*bound).value();

  std::vector<std::unique_ptr<Messenger>> clients;
  for (NodeId id : {NodeId{1}, NodeId{3}}) {
    MessengerOptions co;
    co.node_id = id;
    auto c = Messenger::create(loop, co, [](NodeId, std::span<const std::byte>) {});
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE((*c)->add_peer(kServer, to_server).ok());
    // Index 0 sets the session up; the burst (1, 2) then arrives in one read.
    ASSERT_TRUE((*c)->send(kServer, filled(id, 0)).ok());
    clients.push_back(std::move(c).value());
  }
  ASSERT_TRUE(loop.run_for([&] { return got[1].size() == 1 && got[3].size() == 1; }, 10s));
  for (NodeId id : {NodeId{1}, NodeId{3}}) {
    auto& c = clients[id == 1 ? 0 : 1];
    ASSERT_TRUE(c->send(kServer, filled(id, 1)).ok());
    ASSERT_TRUE(c->send(kServer, filled(id, 2)).ok());
  }
  EXPECT_TRUE(loop.run_for([&] { return got[1].size() == 3 && got[3].size() == 3; }, 10s));
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(nested, 1);
  EXPECT_EQ(got[1], (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(got[3], (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(faults, 0) << "a connection failed (a corrupted frame)";
  clients.clear();
  server.reset();
  loop.run_for([] { return false; }, 20ms);
}

}  // namespace
}  // namespace rmsg
