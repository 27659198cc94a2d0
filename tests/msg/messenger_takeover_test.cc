// Review #3, the part that needs no keys: a hello that claims its node restarted (a new
// client cookie) while that node's session has an open connection. The old connection
// decides (session_takeover.cc): it answers a probe, and the hello is refused as a
// duplicate node id; it is dead (reset by a killed process's kernel when the probe reaches
// it) or half-open (no answer), and the hello is accepted as the restart it claims.
#include <gtest/gtest.h>

#include <array>

#include "msg/messenger_loopback_fixture.h"
#include "wire/banner.h"
#include "wire/frame_decoder.h"
#include "wire/frame_encoder.h"
#include "wire/session_frames.h"

namespace rmsg::testing {
namespace {

using wire::FrameType;
using namespace std::chrono_literals;

class MessengerTakeoverTest : public MessengerLoopbackTest {
 protected:
  void SetUp() override {
    MessengerLoopbackTest::SetUp();
    start_both();
    send_a(5);
    ASSERT_TRUE(run([&] { return b_has_all_from_a(); }));
  }
  // A second process with A's node id (a restart, or an impostor): banner and a
  // client_ident with a cookie of its own.
  void claim_a_restarted() {
    loopback_connect(*loop_, "lo", kPortB, {}, [this](Result<Stream> r) {
      ASSERT_TRUE(r.ok());
      claimant_ = std::move(r).value();
    });
    ASSERT_TRUE(run([&] { return claimant_.valid(); }));
    std::vector<std::byte> out;
    const auto banner = wire::encode_banner(wire::Banner{});
    out.insert(out.end(), banner.begin(), banner.end());
    const auto h = wire::encode(wire::Hello{
        .node = kA, .target = kB, .client_cookie = 0xc1a1, .global_seq = 1, .connect_seq = 1});
    std::array<std::byte, 512> buf{};
    const wire::Segment seg{h, 0};
    auto n = wire::encode_frame_to(buf, FrameType::client_ident, std::span(&seg, 1), {});
    ASSERT_TRUE(n.ok());
    out.insert(out.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n.value()));
    auto w = claimant_.write(out);
    ASSERT_TRUE(w.ok() && w.value() == out.size());
  }
  // What B answered the claimant, read until B closed it (or `limit` passed).
  std::vector<std::byte> claimant_reads(Duration limit) {
    std::vector<std::byte> got;
    std::array<std::byte, 4096> buf{};
    loop_->run_for(
        [&] {
          auto n = claimant_.read(buf);
          if (n.ok() && n.value() > 0) got.insert(got.end(), buf.begin(), buf.begin() + n.value());
          return (n.ok() && n.value() == 0) || (!n.ok() && !n.is(Errc::would_block));
        },
        limit);
    return got;
  }
  int resets(const Node& n, MessengerErrc why) const {
    int k = 0;
    for (const auto& e : n.events) {
      k += e.kind == SessionEvent::Kind::reset && e.error == make_error_code(why);
    }
    return k;
  }

  Stream claimant_;
};

// A is alive and answers: the claim is refused (close, duplicate_node) and counted; A's
// session is neither reset nor disturbed.
TEST_F(MessengerTakeoverTest, ARestartClaimedWhileTheConnectionAnswersIsRefused) {
  claim_a_restarted();
  ASSERT_TRUE(run([&] { return b_.node.counter("msg.duplicate_node") == 1; }));
  const auto answer = claimant_reads(1s);
  // Its banner, then one close frame whose reason is duplicate_node (and no welcome).
  ASSERT_GT(answer.size(), wire::kBannerSize);
  wire::WireDecoder dec(wire::DecoderOptions{.local = wire::Banner{}, .limits = {}});
  std::span<const std::byte> in(answer);
  std::vector<wire::Frame> frames;
  while (!in.empty()) {
    const auto ev = dec.feed(in);
    ASSERT_NE(ev, wire::DecodeEvent::error);
    if (ev == wire::DecodeEvent::frame) frames.push_back(dec.take_frame());
  }
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].type(), FrameType::close);
  auto reason = wire::decode_reason(frames[0].segment(0));
  ASSERT_TRUE(reason.ok());
  EXPECT_EQ(reason->reason, wire::CloseReason::duplicate_node);
  EXPECT_EQ(b_.node.count(SessionEvent::Kind::reset), 0);
  EXPECT_EQ(a_.node.count(SessionEvent::Kind::reset), 0);
  EXPECT_EQ(a_.node.count(SessionEvent::Kind::disconnected), 0);
  EXPECT_EQ(b_.node.counter("msg.errors.duplicate_node"), 1u);
  send_a(5);
  ASSERT_TRUE(run([&] { return b_has_all_from_a(); }));
  expect_clean();
}

// The process behind A's connection was killed (-9) and its restart's hello arrives before
// the kernel's reset: the probe meets the reset, and the restart is accepted at once.
TEST_F(MessengerTakeoverTest, ARestartAfterAKillIsAcceptedAtOnce) {
  send_b(10, 256);  // B's stream to A has written more than 2000 bytes now
  ASSERT_TRUE(run([&] { return a_has_all_from_b(); }));
  a_.connect->fail_connects(make_error_code(Errc::connection_refused), 1000);  // A is gone
  // ... and the next bytes B writes to its socket meet a reset (the claimant's stream,
  // also accepted by B, stays far below 2000 bytes).
  b_.accept->fail_write(make_error_code(Errc::connection_reset), 2000);
  const auto t0 = loop_->now();
  claim_a_restarted();
  ASSERT_TRUE(run([&] { return resets(b_.node, MessengerErrc::peer_restarted) == 1; }));
  EXPECT_LT(loop_->now() - t0, 50ms);
  EXPECT_EQ(b_.node.counter("msg.takeover.probes"), 1u);  // the probe met the reset
  EXPECT_EQ(b_.node.counter("msg.duplicate_node"), 0u);
  ASSERT_TRUE(run([&] {
    auto i = b_.node.m->session_info(kA);
    return i && i->connected;
  }));
}

// The old connection is half-open (A's host went away: nothing it sent arrives any more):
// the probe goes unanswered, and the restart is accepted after handshake_timeout / 4.
TEST_F(MessengerTakeoverTest, ARestartBehindAHalfOpenConnectionIsAcceptedPromptly) {
  a_.connect->delay(1h);  // A's bytes (its keepalive answers too) never arrive
  const auto t0 = loop_->now();
  claim_a_restarted();
  ASSERT_TRUE(run([&] { return resets(b_.node, MessengerErrc::peer_restarted) == 1; }));
  const auto took = loop_->now() - t0;
  EXPECT_GE(took, options(kB).handshake_timeout / 4);
  EXPECT_LT(took, options(kB).handshake_timeout / 4 + 50ms);
  EXPECT_EQ(b_.node.counter("msg.takeover.probes"), 1u);
  EXPECT_EQ(b_.node.counter("msg.duplicate_node"), 0u);
  ASSERT_TRUE(run([&] {
    auto i = b_.node.m->session_info(kA);
    return i && i->connected;
  }));
}

}  // namespace
}  // namespace rmsg::testing
