#include "rdma/wire.h"

#include <gtest/gtest.h>

#include <vector>

namespace rmsg::rdma::wire {
namespace {

Hello sample() {
  Hello h;
  h.kind = HelloKind::request;
  h.recv_block_size = 16384;
  h.recv_block_count = 16;
  h.send_block_size = 8192;
  h.send_block_count = 32;
  h.inline_size = 256;
  return h;
}

TEST(WireHello, RoundTripsThroughZeroPaddedPrivateData) {
  const auto bytes = encode_hello(sample());
  std::vector<std::byte> padded(bytes.begin(), bytes.end());
  padded.resize(56);  // the CM hands the acceptor 56 zero-padded bytes
  auto h = decode_hello(padded);
  ASSERT_TRUE(h.ok()) << h.error().message();
  EXPECT_EQ(h->kind, HelloKind::request);
  EXPECT_EQ(h->recv_block_size, 16384u);
  EXPECT_EQ(h->recv_block_count, 16u);
  EXPECT_EQ(h->send_block_size, 8192u);
  EXPECT_EQ(h->send_block_count, 32u);
  EXPECT_EQ(h->inline_size, 256u);
}

TEST(WireHello, IsBigEndianWithMagicFirst) {
  const auto b = encode_hello(sample());
  EXPECT_EQ(b[0], std::byte{'R'});
  EXPECT_EQ(b[3], std::byte{'G'});
  EXPECT_EQ(b[4], std::byte{kVersion});
  EXPECT_EQ(b[5], std::byte{kHelloSize});
  EXPECT_EQ(b[8], std::byte{0});
  EXPECT_EQ(b[10], std::byte{0x40});  // 16384 = 0x00004000
}

TEST(WireHello, OtherVersionIsVersionMismatch) {
  auto b = encode_hello(sample());
  b[4] = std::byte{2};
  EXPECT_TRUE(decode_hello(b).is(Errc::version_mismatch));
}

TEST(WireHello, MalformedIsProtocolError) {
  auto b = encode_hello(sample());
  EXPECT_TRUE(decode_hello(std::span(b).first(7)).is(Errc::protocol_error));
  EXPECT_TRUE(decode_hello(std::span(b).first(20)).is(Errc::protocol_error));  // cut short
  auto bad_magic = b;
  bad_magic[0] = std::byte{'X'};
  EXPECT_TRUE(decode_hello(bad_magic).is(Errc::protocol_error));
  auto few_blocks = sample();
  few_blocks.recv_block_count = kMinRecvBlocks - 1;
  EXPECT_TRUE(decode_hello(encode_hello(few_blocks)).is(Errc::protocol_error));
  auto zero_block = sample();
  zero_block.recv_block_size = 0;
  EXPECT_TRUE(decode_hello(encode_hello(zero_block)).is(Errc::protocol_error));
  std::vector<std::byte> zeros(56);
  EXPECT_TRUE(decode_hello(zeros).is(Errc::protocol_error));
}

TEST(WireHello, RejectNeedsNoGeometry) {
  Hello h;
  h.kind = HelloKind::reject;
  h.reason = RejectReason::version;
  auto d = decode_hello(encode_hello(h));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->reason, RejectReason::version);
}

TEST(WireImm, Layout) {
  EXPECT_EQ(encode_imm(MsgType::credit, 0x1234), 0x00011234u);
  auto imm = decode_imm(0x00020005u);
  ASSERT_TRUE(imm.ok());
  EXPECT_EQ(imm->type, MsgType::fin);
  EXPECT_EQ(imm->credits, 5);
  EXPECT_TRUE(decode_imm(0x01000000u).is(Errc::protocol_error));  // reserved bits
  auto ka = decode_imm(0x00030002u);
  ASSERT_TRUE(ka.ok());
  EXPECT_EQ(ka->type, MsgType::keepalive);
  EXPECT_EQ(ka->credits, 2);
  EXPECT_TRUE(decode_imm(0x00040000u).is(Errc::protocol_error));  // unknown type
}

TEST(WireWrId, CarriesGenerationKindIndex) {
  const auto id = make_wr_id(0xBEEF, WrKind::recv, (std::uint64_t{1} << 40) - 1);
  EXPECT_EQ(wr_generation(id), 0xBEEF);
  EXPECT_EQ(wr_kind(id), WrKind::recv);
  EXPECT_EQ(wr_index(id), (std::uint64_t{1} << 40) - 1);
}

}  // namespace
}  // namespace rmsg::rdma::wire
