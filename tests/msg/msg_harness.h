// Test harness for messengers: numbered payloads, a ledger that checks exactly-once
// in-order delivery per sender, nodes (a messenger with its ledger and events), and a
// StreamFactory over the kit's loopback stream with fault injectors per side.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "kit/loopback.h"
#include "msg/seams.h"
#include "rmsg/messenger.h"

namespace rmsg::testing {

// Payload: u64 index (little-endian host order is fine: both ends are this process), then
// `len - 8` filler bytes derived from it.
inline std::vector<std::byte> numbered(std::uint64_t index, std::size_t len = 32) {
  std::vector<std::byte> p(std::max<std::size_t>(len, 8));
  std::memcpy(p.data(), &index, 8);
  for (std::size_t i = 8; i < p.size(); ++i) p[i] = static_cast<std::byte>(index * 31 + i);
  return p;
}
inline std::uint64_t index_of(std::span<const std::byte> p) {
  std::uint64_t v = 0;
  if (p.size() >= 8) std::memcpy(&v, p.data(), 8);
  return v;
}

// What one node received from each sender: indices must rise by one; a skip is allowed
// only where the sender was handed the missing messages back by a session reset.
struct Ledger {
  std::map<NodeId, std::uint64_t> last;  // highest index delivered per sender
  std::map<NodeId, std::set<std::uint64_t>> skipped;
  std::uint64_t delivered = 0;
  std::uint64_t doubled = 0;  // at or below `last`: a duplicate or out of order
  std::uint64_t corrupt = 0;

  void on_message(NodeId from, std::span<const std::byte> p) {
    const std::uint64_t idx = index_of(p);
    for (std::size_t i = 8; i < p.size(); ++i) {
      if (p[i] != static_cast<std::byte>(idx * 31 + i)) {
        ++corrupt;
        break;
      }
    }
    ++delivered;
    std::uint64_t& l = last[from];
    if (idx <= l) {
      ++doubled;
      return;
    }
    for (std::uint64_t i = l + 1; i < idx; ++i) skipped[from].insert(i);
    l = idx;
  }
};

struct Node {
  std::unique_ptr<Messenger> m;
  Ledger ledger;
  std::vector<SessionEvent> events;
  std::map<NodeId, std::uint64_t> next_index;  // per peer, the next index to send
  std::map<NodeId, std::set<std::uint64_t>> handed_back;

  Result<void> send_next(NodeId peer, std::size_t len = 32) {
    const std::uint64_t idx = next_index[peer] + 1;
    auto r = m->send(peer, numbered(idx, len));
    if (r) next_index[peer] = idx;
    return r;
  }
  int count(SessionEvent::Kind k) const {
    int n = 0;
    for (const auto& e : events) n += e.kind == k;
    return n;
  }
  std::uint64_t counter(std::string_view name) const { return m->counters().value(name); }
  void on_event(SessionEvent e) {
    for (const auto& p : e.unknown) handed_back[e.peer].insert(index_of(p));
    for (const auto& p : e.unsent) handed_back[e.peer].insert(index_of(p));
    events.push_back(std::move(e));
  }
};

// Loopback streams: "connect to 127.0.0.1:P" reaches the loopback listener on port P.
class LoopbackStreams final : public StreamFactory {
 public:
  LoopbackStreams(EventLoop& loop, std::shared_ptr<LoopbackFaults> connect_faults,
                  std::shared_ptr<LoopbackFaults> accept_faults)
      : loop_(loop), connect_(std::move(connect_faults)), accept_(std::move(accept_faults)) {}
  void connect(const ConnectionParams& params, ConnectCallback done) override {
    loopback_connect(loop_, "lo", params.peer.port(), {.faults = connect_}, std::move(done));
  }
  Result<Listener> listen(const SocketAddress& address, const ConnectionParams&,
                          AcceptCallback on_accept) override {
    return loopback_listen(loop_, "lo", address.port(), {.faults = accept_}, std::move(on_accept));
  }

 private:
  EventLoop& loop_;
  std::shared_ptr<LoopbackFaults> connect_;
  std::shared_ptr<LoopbackFaults> accept_;
};

// A node that reconnects fast (backoff 2-50 ms), for tests that break connections.
inline MessengerOptions quick_reconnect_options(NodeId id) {
  MessengerOptions o;
  o.node_id = id;
  o.backoff_initial = std::chrono::milliseconds(2);
  o.backoff_max = std::chrono::milliseconds(50);
  return o;
}

// TCP to "ip:port".
inline ConnectionParams tcp_params(const std::string& address) {
  ConnectionParams p;
  p.transport = Transport::tcp;
  p.peer = SocketAddress::parse(address).value();
  return p;
}

inline ConnectionParams loopback_params(std::uint16_t port) {
  ConnectionParams p;
  p.transport = Transport::tcp;
  p.peer = SocketAddress::parse("127.0.0.1:" + std::to_string(port)).value();
  return p;
}

// Every index the sender sent was delivered once, in order, or handed back by a reset.
inline void expect_exactly_once(const Node& sender, NodeId sender_id, const Node& receiver,
                                NodeId receiver_id) {
  EXPECT_EQ(receiver.ledger.doubled, 0u);
  EXPECT_EQ(receiver.ledger.corrupt, 0u);
  const auto sent_it = sender.next_index.find(receiver_id);
  const std::uint64_t sent = sent_it == sender.next_index.end() ? 0 : sent_it->second;
  const auto last_it = receiver.ledger.last.find(sender_id);
  const std::uint64_t last = last_it == receiver.ledger.last.end() ? 0 : last_it->second;
  std::set<std::uint64_t> none;
  const auto hb_it = sender.handed_back.find(receiver_id);
  const auto& hb = hb_it == sender.handed_back.end() ? none : hb_it->second;
  const auto sk_it = receiver.ledger.skipped.find(sender_id);
  if (sk_it != receiver.ledger.skipped.end()) {
    for (std::uint64_t i : sk_it->second) EXPECT_TRUE(hb.contains(i)) << "lost " << i;
  }
  for (std::uint64_t i = last + 1; i <= sent; ++i) {
    EXPECT_TRUE(hb.contains(i)) << "never delivered and not handed back: " << i;
  }
}

}  // namespace rmsg::testing
