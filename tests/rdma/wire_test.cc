#include "rdma/wire.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <vector>

namespace rmsg::rdma::wire {
namespace {

std::vector<std::byte> bytes(std::initializer_list<int> values) {
  std::vector<std::byte> v;
  for (const int x : values) v.push_back(static_cast<std::byte>(x));
  return v;
}

std::vector<std::byte> as_vector(const HelloBytes& b) {
  return {b.begin(), b.end()};
}

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

// The request hello of sample() with epoch 0x00020005, byte for byte as rmsg before the
// extension block sent it (and as docs/protocol.md's table spells it).
const std::vector<std::byte> kGoldenRequest = bytes({
    0x52, 0x4D, 0x53, 0x47,  // magic "RMSG"
    0x01,                    // version 1
    0x20,                    // length 32: no extension block
    0x01,                    // kind request
    0x00,                    // reject reason none
    0x00, 0x00, 0x40, 0x00,  // recv_block_size 16384
    0x00, 0x00, 0x00, 0x10,  // recv_block_count 16
    0x00, 0x00, 0x20, 0x00,  // send_block_size 8192
    0x00, 0x00, 0x00, 0x20,  // send_block_count 32
    0x00, 0x00, 0x01, 0x00,  // inline_size 256
    0x00, 0x02, 0x00, 0x05,  // epoch: serial 2, generation 5
});

Hello golden_sample() {
  Hello h = sample();
  h.epoch = 0x00020005;
  return h;
}

TEST(WireHelloGolden, HelloWithoutFeaturesIsTheVersion1Bytes) {
  EXPECT_EQ(as_vector(encode_hello(golden_sample())), kGoldenRequest);
  Hello reject;
  reject.kind = HelloKind::reject;
  reject.reason = RejectReason::resources;
  auto expect = bytes({0x52, 0x4D, 0x53, 0x47, 0x01, 0x20, 0x03, 0x03});
  expect.resize(32);  // every field after the reason is 0 in a reject
  EXPECT_EQ(as_vector(encode_hello(reject)), expect);
}

TEST(WireHelloGolden, OlderPeers32ByteHelloDecodesPaddedOrNot) {
  std::vector<std::byte> padded = kGoldenRequest;
  padded.resize(kMaxConnectPrivateData);  // as the CM delivers a request
  for (const auto& data : {kGoldenRequest, padded}) {
    auto h = decode_hello(data);
    ASSERT_TRUE(h.ok()) << h.error().message();
    EXPECT_EQ(h->kind, HelloKind::request);
    EXPECT_EQ(h->recv_block_size, 16384u);
    EXPECT_EQ(h->recv_block_count, 16u);
    EXPECT_EQ(h->send_block_size, 8192u);
    EXPECT_EQ(h->send_block_count, 32u);
    EXPECT_EQ(h->inline_size, 256u);
    EXPECT_EQ(h->epoch, 0x00020005u);
    EXPECT_EQ(h->features, 0u);
  }
}

TEST(WireHelloGolden, FeatureBitsRoundTripInTheExtensionBlock) {
  Hello h = golden_sample();
  h.features = 0x80000001;
  const auto encoded = as_vector(encode_hello(h));
  auto expect = kGoldenRequest;
  expect[5] = std::byte{38};  // length: 32 + one features field
  for (const auto b : bytes({0x01, 0x04, 0x80, 0x00, 0x00, 0x01})) expect.push_back(b);
  EXPECT_EQ(encoded, expect);
  std::vector<std::byte> padded = encoded;
  padded.resize(kMaxConnectPrivateData);
  for (const auto& data : {encoded, padded}) {
    auto d = decode_hello(data);
    ASSERT_TRUE(d.ok()) << d.error().message();
    EXPECT_EQ(d->features, 0x80000001u);
    EXPECT_EQ(d->epoch, 0x00020005u);
  }
  // Feature bits in an accept and a reject travel the same way.
  h.kind = HelloKind::accept;
  h.features = 0x00010000;
  EXPECT_EQ(decode_hello(encode_hello(h))->features, 0x00010000u);
}

// The connector's routing value (extension type 2): absent at 0, so a request without
// it stays the golden bytes; big-endian u64; only requests carry it.
TEST(WireHelloGolden, AffinityRoundTripsInRequestsOnly) {
  Hello h = golden_sample();
  h.affinity = 0;
  EXPECT_EQ(as_vector(encode_hello(h)), kGoldenRequest);
  h.affinity = 0x0102030405060708;
  h.features = 0x80000001;
  const auto encoded = as_vector(encode_hello(h));
  auto expect = kGoldenRequest;
  expect[5] = std::byte{48};  // length: 32 + features (6) + affinity (10)
  for (const auto b : bytes({0x01, 0x04, 0x80, 0x00, 0x00, 0x01, 0x02, 0x08, 0x01, 0x02, 0x03, 0x04,
                             0x05, 0x06, 0x07, 0x08})) {
    expect.push_back(b);
  }
  EXPECT_EQ(encoded, expect);
  std::vector<std::byte> padded = encoded;
  padded.resize(kMaxConnectPrivateData);
  auto d = decode_hello(padded);
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ(d->affinity, 0x0102030405060708u);
  EXPECT_EQ(d->features, 0x80000001u);
  // An accept never carries it (the listener routes requests only).
  h.kind = HelloKind::accept;
  EXPECT_EQ(encode_hello(h).size(), kHelloSize + kFeaturesFieldSize);
  EXPECT_EQ(decode_hello(encode_hello(h))->affinity, 0u);
  // A wrong size or a second affinity field is a malformed hello.
  auto with_block = [](std::initializer_list<int> block) {
    auto data = kGoldenRequest;
    for (const auto b : bytes(block)) data.push_back(b);
    data[5] = static_cast<std::byte>(data.size());
    return data;
  };
  EXPECT_TRUE(decode_hello(with_block({0x02, 0x04, 0, 0, 0, 1})).is(Errc::protocol_error));
  EXPECT_TRUE(decode_hello(with_block({0x02, 0x08, 0, 0, 0, 0, 0, 0, 0, 1,
                                       0x02, 0x08, 0, 0, 0, 0, 0, 0, 0, 2}))
                  .is(Errc::protocol_error));
}

// The shared-receive mode's field (extension type 4): only with feature bit 0, a request
// with features, affinity and recv_window is 54 bytes, within the CM's 56.
TEST(WireHelloGolden, RecvWindowTravelsWithTheSharedReceiveBit) {
  Hello h = golden_sample();  // recv_block_count 16
  h.recv_window = 64;
  EXPECT_EQ(as_vector(encode_hello(h)), kGoldenRequest) << "sent without bit 0";
  h.features = kFeatureSharedReceive;
  h.affinity = 0x0102030405060708;
  const auto encoded = as_vector(encode_hello(h));
  ASSERT_EQ(encoded.size(), 54u);
  EXPECT_EQ(encoded[5], std::byte{54});
  const std::vector<std::byte> field(encoded.end() - 6, encoded.end());
  EXPECT_EQ(field, bytes({0x04, 0x04, 0x00, 0x00, 0x00, 0x40}));
  std::vector<std::byte> padded = encoded;
  padded.resize(kMaxConnectPrivateData);
  auto d = decode_hello(padded);
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ(d->recv_window, 64u);
  EXPECT_EQ(d->features, kFeatureSharedReceive);
  auto with_block = [](std::initializer_list<int> block) {
    auto data = kGoldenRequest;
    for (const auto b : bytes(block)) data.push_back(b);
    data[5] = static_cast<std::byte>(data.size());
    return data;
  };
  // With bit 0 and a window >= recv_block_count (16): fine.
  EXPECT_TRUE(decode_hello(with_block({0x01, 0x04, 0, 0, 0, 1, 0x04, 0x04, 0, 0, 0, 16})).ok());
  // Without bit 0, below recv_block_count, the wrong size, twice: malformed.
  EXPECT_TRUE(decode_hello(with_block({0x04, 0x04, 0, 0, 0, 32})).is(Errc::protocol_error));
  EXPECT_TRUE(decode_hello(with_block({0x01, 0x04, 0, 0, 0, 1, 0x04, 0x04, 0, 0, 0, 15}))
                  .is(Errc::protocol_error));
  EXPECT_TRUE(decode_hello(with_block({0x01, 0x04, 0, 0, 0, 1, 0x04, 0x02, 0, 32}))
                  .is(Errc::protocol_error));
  EXPECT_TRUE(decode_hello(with_block({0x01, 0x04, 0, 0, 0, 1, 0x04, 0x04, 0, 0, 0, 32, 0x04, 0x04,
                                       0, 0, 0, 32}))
                  .is(Errc::protocol_error));
}

TEST(WireHelloGolden, UnknownFieldsAreSkipped) {
  auto data = kGoldenRequest;
  // type 0x7F (unknown) with 3 bytes, type 0 (reserved) empty, the features field,
  // type 0xFF (unknown) with 0 bytes: 5 + 2 + 6 + 2 = 15 bytes of block.
  for (const auto b : bytes({0x7F, 0x03, 0xAA, 0xBB, 0xCC, 0x00, 0x00, 0x01, 0x04, 0x00, 0x00, 0x00,
                             0x05, 0xFF, 0x00})) {
    data.push_back(b);
  }
  data[5] = std::byte{47};
  data.resize(kMaxConnectPrivateData);
  auto h = decode_hello(data);
  ASSERT_TRUE(h.ok()) << h.error().message();
  EXPECT_EQ(h->features, 5u);
  EXPECT_EQ(h->recv_block_count, 16u);
  // A block of unknown fields only: no features.
  auto unknown = kGoldenRequest;
  for (const auto b : bytes({0x09, 0x02, 0x12, 0x34})) unknown.push_back(b);
  unknown[5] = std::byte{36};
  auto u = decode_hello(unknown);
  ASSERT_TRUE(u.ok()) << u.error().message();
  EXPECT_EQ(u->features, 0u);
  // Bytes after `length` are not the hello's: even a broken field there is ignored.
  auto tail = kGoldenRequest;
  for (const auto b : bytes({0x01, 0x09})) tail.push_back(b);
  EXPECT_TRUE(decode_hello(tail).ok());
}

TEST(WireHelloGolden, MalformedBlockIsProtocolError) {
  auto with_block = [](std::initializer_list<int> block) {
    auto data = kGoldenRequest;
    for (const auto b : bytes(block)) data.push_back(b);
    data[5] = static_cast<std::byte>(data.size());
    data.resize(kMaxConnectPrivateData);
    return data;
  };
  // A field that runs past `length` (even where zero padding follows).
  EXPECT_TRUE(decode_hello(with_block({0x7F, 0x04, 0x01})).is(Errc::protocol_error));
  // A type without its length byte.
  EXPECT_TRUE(decode_hello(with_block({0x7F})).is(Errc::protocol_error));
  // The features field with another size, or twice.
  EXPECT_TRUE(decode_hello(with_block({0x01, 0x03, 0x00, 0x00, 0x05})).is(Errc::protocol_error));
  EXPECT_TRUE(decode_hello(with_block({0x01, 0x04, 0, 0, 0, 1, 0x01, 0x04, 0, 0, 0, 1}))
                  .is(Errc::protocol_error));
  // `length` beyond the delivered bytes.
  auto cut = as_vector(encode_hello(golden_sample()));
  cut[5] = std::byte{40};
  EXPECT_TRUE(decode_hello(cut).is(Errc::protocol_error));
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
  auto release = decode_imm(0x00040003u);  // the shared-receive mode's release
  ASSERT_TRUE(release.ok());
  EXPECT_EQ(release->type, MsgType::release);
  EXPECT_TRUE(decode_imm(0x00050000u).is(Errc::protocol_error));  // unknown type
}

TEST(WireWrId, CarriesGenerationKindIndex) {
  const auto id = make_wr_id(0xBEEF, WrKind::recv, (std::uint64_t{1} << 40) - 1);
  EXPECT_EQ(wr_generation(id), 0xBEEF);
  EXPECT_EQ(wr_kind(id), WrKind::recv);
  EXPECT_EQ(wr_index(id), (std::uint64_t{1} << 40) - 1);
}

}  // namespace
}  // namespace rmsg::rdma::wire
