// Bad input from a raw peer: each kind closes that connection with its own counted error,
// allocates nothing from a length it did not check, and leaves the messenger serving
// others.
#include <gtest/gtest.h>

#include <array>

#include "msg/heap_in_use.h"
#include "msg/messenger_loopback_fixture.h"
#include "session/reassembly.h"
#include "wire/banner.h"
#include "wire/frame_encoder.h"
#include "wire/session_frames.h"

namespace rmsg::testing {
namespace {

using wire::FrameType;

class MessengerBadInputTest : public MessengerLoopbackTest {
 protected:
  // A raw connection to B's listener.
  void connect_raw() {
    loopback_connect(*loop_, "lo", kPortB, {}, [this](Result<Stream> r) {
      ASSERT_TRUE(r.ok());
      raw_ = std::move(r).value();
    });
    ASSERT_TRUE(run([&] { return raw_.valid(); }));
  }
  void write_raw(std::span<const std::byte> bytes) {
    while (!bytes.empty()) {
      auto n = raw_.write(bytes);
      ASSERT_TRUE(n.ok()) << n.error().message();
      bytes = bytes.subspan(n.value());
    }
  }
  void write_banner() { write_raw(wire::encode_banner(wire::Banner{})); }
  void write_frame(FrameType type, std::span<const std::byte> a,
                   std::span<const std::byte> b = {}) {
    std::array<std::byte, 4096> buf{};
    const wire::Segment segs[2] = {{a, 0}, {b, 0}};
    auto n = wire::encode_frame_to(buf, type, std::span(segs, b.empty() ? 1 : 2), {});
    ASSERT_TRUE(n.ok()) << n.error().message();
    write_raw(std::span(buf).first(n.value()));
  }
  void write_hello(wire::Cookie cookie = 77, std::uint64_t global_seq = 1) {
    const auto h = wire::encode(wire::Hello{.node = 9,
                                            .target = kB,
                                            .client_cookie = cookie,
                                            .global_seq = global_seq,
                                            .connect_seq = 1});
    write_frame(FrameType::client_ident, h);
  }
  // Runs until B counted `error` once, and checks that the raw stream was closed on.
  void expect_closed_with(std::string_view error) {
    const std::string name = "msg.errors." + std::string(error);
    ASSERT_TRUE(run([&] { return b_.node.counter(name) == 1; })) << name;
    std::array<std::byte, 4096> buf{};
    bool closed = false;
    ASSERT_TRUE(run([&] {
      auto n = raw_.read(buf);
      closed = (n.ok() && n.value() == 0) || (!n.ok() && !n.is(Errc::would_block));
      return closed;
    }));
    EXPECT_TRUE(closed);
  }
  // B still serves A afterwards.
  void expect_b_serves() {
    ASSERT_TRUE(a_.node.m->add_peer(kB, loopback_params(kPortB)).ok());
    send_a(5);
    ASSERT_TRUE(run([&] { return b_has_all_from_a(); }));
  }
  void SetUp() override {
    MessengerLoopbackTest::SetUp();
    start_a(options(kA));
    start_b(options(kB));
  }

  Stream raw_;
};

TEST_F(MessengerBadInputTest, BadMagic) {
  connect_raw();
  std::array<std::byte, 36> junk{};
  junk.fill(std::byte{'x'});
  write_raw(junk);
  expect_closed_with("bad_magic");
  expect_b_serves();
}

TEST_F(MessengerBadInputTest, BadPreambleCrcIsCheckedBeforeAnyLength) {
  connect_raw();
  write_banner();
  std::array<std::byte, 32> preamble{};
  preamble[0] = std::byte{11};
  preamble[2] = std::byte{1};
  preamble[4] = std::byte{0xff};  // a length of 4 GiB - 1 ...
  preamble[7] = std::byte{0xff};  // ... under a wrong CRC: never allocated
  write_raw(preamble);
  expect_closed_with("preamble_crc");
  expect_b_serves();
}

TEST_F(MessengerBadInputTest, BadSegmentCrc) {
  connect_raw();
  write_banner();
  write_hello();
  const auto h = wire::encode(wire::MessageHeader{1, 0, 0});
  std::array<std::byte, 16> body{};
  std::array<std::byte, 4096> buf{};
  const wire::Segment segs[2] = {{h, 0}, {body, 0}};
  auto n = wire::encode_frame_to(buf, FrameType::message, segs, {});
  ASSERT_TRUE(n.ok());
  buf[wire::kPreambleSize + wire::MessageHeader::kSize + 3] ^= std::byte{1};  // a payload bit
  write_raw(std::span(buf).first(n.value()));
  expect_closed_with("segment_crc");
  EXPECT_EQ(b_.node.ledger.delivered, 0u);  // the frame is not delivered
}

TEST_F(MessengerBadInputTest, OversizeFrameIsRefusedBeforeAllocation) {
  connect_raw();
  write_banner();
  wire::Preamble p;
  p.type = FrameType::message;
  p.segment_count = 1;
  p.lengths[0] = 1u << 30;  // a valid CRC, but over max_message_size
  std::array<std::byte, wire::kPreambleSize> out{};
  wire::encode_preamble(p, out);
  write_raw(out);
  expect_closed_with("oversize");
}

TEST_F(MessengerBadInputTest, MessageBeforeTheHandshake) {
  connect_raw();
  write_banner();
  const auto h = wire::encode(wire::MessageHeader{1, 0, 0});
  write_frame(FrameType::message, h);
  expect_closed_with("unexpected_frame");
}

TEST_F(MessengerBadInputTest, ShortHelloPayload) {
  connect_raw();
  write_banner();
  std::array<std::byte, 8> shorty{};
  write_frame(FrameType::client_ident, shorty);
  expect_closed_with("bad_payload");
}

TEST_F(MessengerBadInputTest, SequenceGap) {
  connect_raw();
  write_banner();
  write_hello();
  const auto h = wire::encode(wire::MessageHeader{5, 0, 0});  // 1 expected
  std::array<std::byte, 16> body{};
  write_frame(FrameType::message, h, body);
  expect_closed_with("sequence_gap");
  EXPECT_EQ(b_.node.ledger.delivered, 0u);
}

TEST_F(MessengerBadInputTest, AckOfAMessageNeverSent) {
  connect_raw();
  write_banner();
  write_hello();
  write_frame(FrameType::ack, wire::encode(wire::Value64{99}));
  expect_closed_with("bad_ack");
}

TEST_F(MessengerBadInputTest, EndOfStreamInsideAFrame) {
  connect_raw();
  write_banner();
  std::array<std::byte, 10> half{};
  write_raw(half);
  ASSERT_TRUE(raw_.shutdown_write().ok());
  expect_closed_with("truncated");
}

// docs/messenger.md, the decision order: node 9's session with cookie 77 is replaced by a
// restart (cookie 88); then a client_ident of 77 is read late, from an attempt abandoned
// before the restart. It must not be taken for a second restart: the newer session and
// its connection stay, and the late attempt alone is answered with a reset.
TEST_F(MessengerBadInputTest, AnAbandonedIdentReadLateDoesNotResetTheNewerSession) {
  auto accepted = [&](std::uint64_t n) {
    return run([&] { return b_.node.counter("msg.decisions.accept") == n; });
  };
  connect_raw();
  write_banner();
  write_hello(77, 1);
  ASSERT_TRUE(accepted(1));
  Stream first = std::move(raw_);
  connect_raw();
  write_banner();
  write_hello(88, 2);  // node 9 restarted
  ASSERT_TRUE(accepted(2));
  EXPECT_EQ(b_.node.counter("msg.resets"), 1u);
  Stream current = std::move(raw_);
  connect_raw();
  write_banner();
  write_hello(77, 1);  // the abandoned attempt's bytes, late
  ASSERT_TRUE(run([&] { return b_.node.counter("msg.decisions.reset") == 1; }));
  EXPECT_EQ(b_.node.counter("msg.decisions.accept"), 2u);
  EXPECT_EQ(b_.node.counter("msg.resets"), 1u) << "the newer session was reset";
  // The current connection is still the session's: B reads a message from it.
  raw_ = std::move(current);
  const auto h = wire::encode(wire::MessageHeader{1, 0, 0});
  std::array<std::byte, 16> body{};
  write_frame(FrameType::message, h, body);
  ASSERT_TRUE(run([&] { return b_.node.ledger.delivered == 1; }));
}

// Writes `frame` `count` times as fast as B reads, never reading what B answers.
void flood(EventLoop& loop, Stream& raw, std::span<const std::byte> frame, int count) {
  std::vector<std::byte> all;
  for (int i = 0; i < count; ++i) all.insert(all.end(), frame.begin(), frame.end());
  std::span<const std::byte> rest(all);
  while (!rest.empty()) {
    auto n = raw.write(rest);
    if (n.ok()) {
      rest = rest.subspan(n.value());
    } else if (n.is(Errc::would_block)) {
      (void)loop.run_once(Duration::zero());
    } else {
      return;  // closed by B
    }
  }
  for (int i = 0; i < 16; ++i) (void)loop.run_once(Duration::zero());
}

std::vector<std::byte> control_frame(FrameType type, std::span<const std::byte> payload) {
  std::array<std::byte, 256> buf{};
  const wire::Segment seg{payload, 0};
  auto n = wire::encode_frame_to(buf, type, std::span(&seg, 1), {});
  return {buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n.value())};
}

// Review #7: a peer that sends keepalives and never reads. Their acks count against the
// write buffer: beyond it they are dropped (one waiting is as good as many), so B's memory
// for the connection stays within write_buffer, and B goes on serving others.
TEST_F(MessengerBadInputTest, KeepalivesFromAPeerThatNeverReadsGrowNothingBeyondTheWriteBuffer) {
  MessengerOptions o = options(kB);
  o.write_buffer = 16 << 10;
  start_b(o);
  connect_raw();
  write_banner();
  write_hello();
  ASSERT_TRUE(run([&] { return b_.node.counter("msg.decisions.accept") == 1; }));
  const auto ka = control_frame(FrameType::keepalive, wire::encode(wire::Value64{1}));
  flood(*loop_, raw_, ka, 3000);  // the loopback pipe back to us (64 KiB) fills up first
  const std::size_t before = heap_in_use();
  flood(*loop_, raw_, ka, 20000);  // ~0.9 MB of acks without the bound
  const std::size_t after = heap_in_use();
  EXPECT_LT(after, before + (64 << 10)) << "grew by " << (after - before) << " bytes";
  EXPECT_GT(b_.node.counter("msg.keepalive_acks_dropped"), 0u);
  expect_b_serves();
}

// Review #23: the handshake's answers (retry, retry_global, wait) to a peer that asks again
// and again without reading count against the write buffer too: past it the connection
// closes (not_reading), and B goes on serving others.
TEST_F(MessengerBadInputTest, HandshakeAnswersToAPeerThatNeverReadsAreBounded) {
  MessengerOptions o = options(kB);
  o.write_buffer = 16 << 10;
  start_b(o);
  connect_raw();
  write_banner();
  write_hello(77, 5);
  ASSERT_TRUE(run([&] { return b_.node.counter("msg.decisions.accept") == 1; }));
  Stream first = std::move(raw_);
  connect_raw();
  write_banner();
  // The same session's cookie with an old global_seq: answered retry_global, each time.
  const auto stale = control_frame(
      FrameType::client_ident,
      wire::encode(wire::Hello{
          .node = 9, .target = kB, .client_cookie = 77, .global_seq = 1, .connect_seq = 2}));
  const std::size_t before = heap_in_use();
  flood(*loop_, raw_, stale, 20000);  // ~1 MB of answers without the bound
  const std::size_t after = heap_in_use();
  // The loopback pipe's 64 KiB, the write buffer's, a connection's own.
  EXPECT_LT(after, before + (256 << 10)) << "grew by " << (after - before) << " bytes";
  EXPECT_EQ(b_.node.counter("msg.errors.not_reading"), 1u);
  expect_b_serves();
}

TEST_F(MessengerBadInputTest, SilentPeerTimesOut) {
  connect_raw();
  const auto t0 = loop_->now();
  expect_closed_with("handshake_timeout");
  EXPECT_GE(loop_->now() - t0, std::chrono::seconds(1));
  expect_b_serves();
}

}  // namespace
}  // namespace rmsg::testing

namespace rmsg::testing {
namespace {

// Malformed fragment sequences (docs/protocol.md, fragments): each closes the connection
// with bad_fragment and nothing of the message is delivered.
class MessengerBadFragmentTest : public MessengerBadInputTest {
 protected:
  void write_piece(wire::Seq seq, bool more, std::size_t len = 512, std::uint32_t lane = 0) {
    const auto h = wire::encode(
        wire::MessageHeader{seq, 0, (lane << 8) | (more ? session::kFlagMoreFragments : 0u)});
    std::vector<std::byte> body(len);
    write_frame(FrameType::message, h, body);
  }
};

TEST_F(MessengerBadFragmentTest, AFragmentOfAnotherMessageInTheMiddle) {
  connect_raw();
  write_banner();
  write_hello();
  write_piece(1, true);
  write_piece(2, false);
  expect_closed_with("bad_fragment");
  EXPECT_EQ(b_.node.ledger.delivered, 0u);
  expect_b_serves();
}

TEST_F(MessengerBadFragmentTest, MoreFragmentsOfAMessageAlreadyComplete) {
  connect_raw();
  write_banner();
  write_hello();
  write_piece(1, false, 16);
  write_piece(1, true);
  expect_closed_with("bad_fragment");
  EXPECT_EQ(b_.node.ledger.delivered, 1u);  // 1 itself was fine
}

TEST_F(MessengerBadFragmentTest, ATotalOverMaxMessageSize) {
  MessengerOptions ob = options(kB);
  ob.max_message_size = 4000;  // each piece fits in a frame; the sum does not
  start_b(ob);
  connect_raw();
  write_banner();
  write_hello();
  for (int i = 0; i < 7; ++i) write_piece(1, true, 512);
  write_piece(1, false, 512);  // 4096 > 4000
  expect_closed_with("bad_fragment");
  EXPECT_EQ(b_.node.ledger.delivered, 0u);
}

TEST_F(MessengerBadFragmentTest, AnUnknownLane) {
  connect_raw();
  write_banner();
  write_hello();
  write_piece(1, false, 16, 9);  // lane 9 does not exist
  expect_closed_with("bad_fragment");
  EXPECT_EQ(b_.node.ledger.delivered, 0u);
}

}  // namespace
}  // namespace rmsg::testing
