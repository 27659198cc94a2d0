// What peers that come and go, or stop reading, can make a node keep (docs/messenger.md,
// Limits): sessions expire after session_expiry without a connection, with their budget;
// at most max_sessions exist; and the send budget that vanished non-readers held is free
// again for everyone once their sessions expired. Raw peers write the wire by hand.
#include <gtest/gtest.h>

#include <array>
#include <map>
#include <vector>

#include "msg/heap_in_use.h"
#include "msg/messenger_loopback_fixture.h"
#include "rpc/rpc_loopback_fixture.h"
#include "wire/banner.h"
#include "wire/frame_encoder.h"
#include "wire/session_frames.h"

namespace rmsg::testing {
namespace {

using wire::FrameType;
using namespace std::chrono_literals;

class MessengerLimitsTest : public MessengerLoopbackTest {
 protected:
  // A raw peer: connected to B, banner and client_ident of `node` written.
  Stream raw_peer(NodeId node, wire::Cookie cookie = 77) {
    Stream s;
    loopback_connect(*loop_, "lo", kPortB, {}, [&s](Result<Stream> r) {
      if (r.ok()) s = std::move(r).value();
    });
    EXPECT_TRUE(run([&] { return s.valid(); }));
    write_all(s, wire::encode_banner(wire::Banner{}));
    const auto h = wire::encode(wire::Hello{
        .node = node, .target = kB, .client_cookie = cookie, .global_seq = 1, .connect_seq = 1});
    write_frame(s, FrameType::client_ident, h);
    return s;
  }
  static void write_all(Stream& s, std::span<const std::byte> bytes) {
    while (!bytes.empty()) {
      auto n = s.write(bytes);
      ASSERT_TRUE(n.ok()) << n.error().message();
      bytes = bytes.subspan(n.value());
    }
  }
  static void write_frame(Stream& s, FrameType type, std::span<const std::byte> a,
                          std::span<const std::byte> b = {}) {
    std::array<std::byte, 512> buf{};
    const wire::Segment segs[2] = {{a, 0}, {b, 0}};
    auto n = wire::encode_frame_to(buf, type, std::span(segs, b.empty() ? 1 : 2), {});
    ASSERT_TRUE(n.ok()) << n.error().message();
    write_all(s, std::span(buf).first(n.value()));
  }
  // A message from a raw peer (its first: number 1).
  static void write_request(Stream& s) {
    const auto h = wire::encode(wire::MessageHeader{1, 0, 0});
    std::array<std::byte, 8> body{};
    write_frame(s, FrameType::message, h, body);
  }
  std::uint64_t live() const { return b_.node.counter("msg.sessions_live"); }
};

// Review #4, B4: 10,000 one-shot peers with distinct node ids (hello, then gone) leave at
// most max_sessions sessions, and little memory, while B keeps serving A.
TEST_F(MessengerLimitsTest, TenThousandOneShotPeersLeaveAtMostMaxSessions) {
  MessengerOptions o = options(kB);
  o.max_sessions = 256;
  start_a(options(kA));
  start_b(o);
  ASSERT_TRUE(a_.node.m->add_peer(kB, loopback_params(kPortB)).ok());
  send_a(1);
  ASSERT_TRUE(run([&] { return b_has_all_from_a(); }));
  const std::size_t before = heap_in_use();
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  constexpr int kPeers = 2000;  // the sanitizer tree looks for memory errors, not volume
#else
  constexpr int kPeers = 10000;
#endif
  constexpr int kBatch = 100;
  std::uint64_t most = 0;
  for (int i = 0; i < kPeers; i += kBatch) {
    std::vector<Stream> batch;
    for (int j = 0; j < kBatch; ++j) batch.push_back(raw_peer(1000 + i + j));
    const auto done = static_cast<std::uint64_t>(i + kBatch);
    ASSERT_TRUE(run([&] {
      return b_.node.counter("msg.decisions.accept") + b_.node.counter("msg.sessions_refused") >=
             done + 1;  // + A's
    }));
    most = std::max(most, live());
    for (auto& s : batch) s.close();  // abortive: gone
    ASSERT_TRUE(run([&] { return b_.node.counter("msg.errors.stream") >= done; }));
  }
  const std::size_t after = heap_in_use();
  EXPECT_LE(most, 256u);
  EXPECT_LE(live(), 256u);
  EXPECT_GE(b_.node.counter("msg.sessions_evicted"), static_cast<std::uint64_t>(kPeers - 256));
  EXPECT_LT(after, before + (16u << 20)) << "grew by " << (after - before) << " bytes";
  // A's session (it has a connection) was never evicted, and B still serves it.
  send_a(5);
  ASSERT_TRUE(run([&] { return b_has_all_from_a(); }));
  EXPECT_EQ(a_.node.count(SessionEvent::Kind::reset), 0);
  expect_clean();
}

// Review #15 (TCP part): connections that never complete their handshake hold at most
// max_inbound_handshakes places at once; one more closes the one waiting longest, and a
// real connector still gets through.
TEST_F(MessengerLimitsTest, SilentConnectionsBeyondMaxInboundHandshakesEvictTheOldest) {
  MessengerOptions o = options(kB);
  o.max_inbound_handshakes = 4;
  o.handshake_timeout = 30s;
  start_a(options(kA));
  start_b(o);
  std::vector<Stream> silent;
  for (int i = 0; i < 10; ++i) {
    loopback_connect(*loop_, "lo", kPortB, {}, [&](Result<Stream> r) {
      ASSERT_TRUE(r.ok());
      silent.push_back(std::move(r).value());
    });
    ASSERT_TRUE(
        run([&] { return b_.node.counter("msg.accepts") == static_cast<unsigned>(i + 1); }));
  }
  EXPECT_EQ(b_.node.counter("msg.handshake.evicted"), 6u);
  auto closed = [&](Stream& s) {
    std::array<std::byte, 64> buf{};
    for (;;) {  // B's banner first, then EOF or a reset for the evicted
      auto n = s.read(buf);
      if (n.ok() && n.value() > 0) continue;
      return !(!n.ok() && n.is(Errc::would_block));
    }
  };
  for (int i = 0; i < 10; ++i) EXPECT_EQ(closed(silent[i]), i < 6) << "connection " << i;
  ASSERT_TRUE(a_.node.m->add_peer(kB, loopback_params(kPortB)).ok());
  send_a(5);
  ASSERT_TRUE(run([&] { return b_has_all_from_a(); }));
  EXPECT_EQ(b_.node.counter("msg.handshake.evicted"), 7u);  // A's made room
}

// A session without a connection for session_expiry is reset as session_expired (its
// users hear it) and forgotten with its budget.
TEST_F(MessengerLimitsTest, ASessionWithoutAConnectionExpires) {
  MessengerOptions o = options(kB);
  o.session_expiry = 2s;
  start_b(o);
  Stream s = raw_peer(9);
  ASSERT_TRUE(run([&] { return b_.node.counter("msg.decisions.accept") == 1; }));
  s.close();
  ASSERT_TRUE(run([&] { return b_.node.counter("msg.disconnects") == 1; }));
  const auto t0 = loop_->now();
  ASSERT_TRUE(run([&] { return b_.node.count(SessionEvent::Kind::reset) == 1; }));
  EXPECT_GE(loop_->now() - t0, 2s);
  EXPECT_LT(loop_->now() - t0, 3s);
  EXPECT_EQ(b_.node.events.back().error, make_error_code(MessengerErrc::session_expired));
  EXPECT_EQ(b_.node.events.back().peer, 9u);
  EXPECT_FALSE(b_.node.m->session_info(9).has_value());
  EXPECT_EQ(live(), 0u);
  EXPECT_EQ(b_.node.counter("msg.sessions_expired"), 1u);
}

// B2: five peers ask for more than the send budget holds, never read, and vanish. Until
// their sessions expire nobody else gets a large reply (the budget is theirs); then a
// fresh peer gets all five within the expiry plus a second, and the memory they held is
// given back.
TEST_F(MessengerLimitsTest, VanishedNonReadersFreeTheSendBudgetAtExpiry) {
  constexpr std::size_t kReply = std::size_t{1} << 20;
  MessengerOptions o = options(kB);
  o.session_expiry = 3s;
  o.session_max_bytes = 8 * kReply;
  o.total_max_bytes = 32 * kReply;
  start_a(options(kA));
  // B answers each message with 1 MiB (8 for a raw peer's), retried on writable.
  std::map<NodeId, int> owed;
  std::map<NodeId, std::uint64_t> next;
  Node& b = b_.node;
  auto flush = [&](NodeId peer) {
    while (owed[peer] > 0 && b.m->send(peer, numbered(next[peer] + 1, kReply)).ok()) {
      ++next[peer];
      --owed[peer];
    }
  };
  {
    auto m = MessengerAccess::create(
        *loop_, o, std::make_unique<LoopbackStreams>(*loop_, b_.connect, b_.accept),
        [&](NodeId from, std::span<const std::byte>) {
          owed[from] += from == kA ? 1 : 8;
          flush(from);
        },
        [&](SessionEvent e) {
          if (e.kind == SessionEvent::Kind::reset) owed.erase(e.peer);  // gone: owed nothing
          if (e.kind == SessionEvent::Kind::writable) flush(e.peer);
          e.unknown.clear();  // the handed-back replies: the application drops them
          e.unsent.clear();
          b.on_event(std::move(e));
        });
    ASSERT_TRUE(m.ok());
    b.m = std::move(m).value();
    ASSERT_TRUE(b.m->listen(loopback_params(kPortB).peer, loopback_params(kPortB)).ok());
  }
  ASSERT_TRUE(a_.node.m->add_peer(kB, loopback_params(kPortB)).ok());
  send_a(1);
  ASSERT_TRUE(run([&] { return a_.node.ledger.delivered == 1; }));
  const std::size_t before = heap_in_use();

  std::vector<Stream> readers_not;
  for (NodeId n = 100; n < 105; ++n) {
    readers_not.push_back(raw_peer(n));
    write_request(readers_not.back());
  }
  ASSERT_TRUE(run([&] { return b.counter("msg.send_refused") > 0 && owed[104] > 0; }));
  const std::size_t peak = heap_in_use();
  EXPECT_GT(peak, before + 24 * kReply);
  for (auto& s : readers_not) s.close();  // gone, without a word
  const auto t0 = loop_->now();
  send_a(5);
  ASSERT_TRUE(
      loop_->run_until([&] { return a_.node.ledger.delivered == 6; }, t0 + o.session_expiry + 1s))
      << a_.node.ledger.delivered - 1 << " of 5 large replies";
  EXPECT_GE(loop_->now() - t0, o.session_expiry) << "replied before the budget was freed?";
  EXPECT_EQ(b.counter("msg.sessions_expired"), 5u);
  EXPECT_EQ(live(), 1u);  // A's
  EXPECT_EQ(a_.node.ledger.corrupt, 0u);
  ASSERT_TRUE(
      run([&] { return b.m->session_info(kA).value_or(Messenger::SessionInfo{}).queued == 0; }));
  const std::size_t after = heap_in_use();
  EXPECT_LT(after, before + (peak - before) / 10)
      << "held " << (peak - before) << " bytes, still " << (after - before);
}

}  // namespace
}  // namespace rmsg::testing

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;

class RpcExpiryTest : public RpcLoopbackTest {};

// The server went away for good: once A's session has had no connection for
// session_expiry, the calls still outstanding fail with session_reset (long before their
// deadline), and the session is gone.
TEST_F(RpcExpiryTest, CallsOfAnExpiredSessionFailWithSessionReset) {
  RpcOptions o = rpc_options(kA);
  o.messenger.session_expiry = 2s;
  start(a_, kPortA, o);
  start_b(rpc_options(kB));
  ASSERT_TRUE(a_.ep->messenger().add_peer(kB, loopback_params(kPortB)).ok());
  auto id = call(kHold, "x", 10min);
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(run([&] { return held_.size() == 1; }));
  b_.ep.reset();  // gone, its request unanswered; A keeps trying to reconnect
  held_.clear();
  const auto t0 = loop_->now();
  ASSERT_TRUE(run([&] { return completed(*id); }));
  EXPECT_EQ(done_[*id].error, make_error_code(RpcErrc::session_reset));
  EXPECT_LT(loop_->now() - t0, 3s);
  bool expired = false;
  for (const auto& e : a_.events) {
    expired |= e.kind == SessionEvent::Kind::reset &&
               e.error == make_error_code(MessengerErrc::session_expired);
  }
  EXPECT_TRUE(expired);
}

}  // namespace
}  // namespace rmsg::testing
