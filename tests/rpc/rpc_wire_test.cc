// The RPC header codec and the dedupe table (pure logic).
#include <gtest/gtest.h>

#include <vector>

#include "rpc/rpc_dedupe.h"
#include "wire/rpc_wire.h"

namespace rmsg::rpc {
namespace {

using namespace rmsg::wire;  // NOLINT(google-build-using-namespace): the codec under test

TEST(RpcWire, RoundTripsEveryField) {
  RpcHeader h;
  h.kind = RpcKind::reply;
  h.flags = kRpcFlagDedupe;
  h.status = RpcStatus::too_large;
  h.word = 0xa1b2c3d4;
  h.id = 0x0102030405060708;
  h.budget_us = 0x1122334455667788;
  const std::vector<std::byte> body{std::byte{7}, std::byte{8}};
  const auto bytes = encode_rpc(h, body);
  ASSERT_EQ(bytes.size(), RpcHeader::kSize + 2);
  // Little-endian, as docs/protocol.md says.
  EXPECT_EQ(bytes[0], std::byte{2});
  EXPECT_EQ(bytes[1], std::byte{1});
  EXPECT_EQ(bytes[2], std::byte{3});
  EXPECT_EQ(bytes[3], std::byte{0});
  EXPECT_EQ(bytes[4], std::byte{0xd4});
  EXPECT_EQ(bytes[8], std::byte{0x08});
  EXPECT_EQ(bytes[16], std::byte{0x88});
  EXPECT_EQ(bytes[24], std::byte{7});
  const auto d = decode_rpc(bytes);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, h.kind);
  EXPECT_EQ(d->flags, h.flags);
  EXPECT_EQ(d->status, h.status);
  EXPECT_EQ(d->word, h.word);
  EXPECT_EQ(d->id, h.id);
  EXPECT_EQ(d->budget_us, h.budget_us);
}

TEST(RpcWire, RejectsMalformedHeaders) {
  RpcHeader h;
  auto good = encode_rpc(h, {});
  EXPECT_TRUE(decode_rpc(good).has_value());
  EXPECT_FALSE(decode_rpc(std::span(good).first(RpcHeader::kSize - 1)).has_value());
  for (auto [at, v] : {std::pair{0, 0}, std::pair{0, 5}, std::pair{2, 6}, std::pair{3, 1}}) {
    auto bad = good;
    bad[static_cast<std::size_t>(at)] = static_cast<std::byte>(v);
    EXPECT_FALSE(decode_rpc(bad).has_value()) << at << "=" << v;
  }
}

TEST(RpcDedupe, EvictsOldestAndForgetsARestartedPeer) {
  constexpr std::uint64_t kS = 77;  // the session
  DedupeTable t(3);
  t.put({1, 1}, kS, 5, {std::byte{1}});
  t.put({1, 2}, kS, 5, {std::byte{2}});
  t.put({2, 1}, kS, 5, {std::byte{3}});
  t.put({1, 2}, kS, 5, {std::byte{4}});  // replaced, not added
  EXPECT_EQ(t.size(), 3u);
  t.put({2, 2}, kS, 5, {std::byte{5}});  // evicts (1,1)
  EXPECT_EQ(t.find({1, 1}, kS, 5), nullptr);
  const std::vector<std::byte>* kept = t.find({1, 2}, kS, 5);
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(kept->size(), 1u);
  EXPECT_EQ(kept->front(), std::byte{4});
  t.forget(2);
  EXPECT_EQ(t.find({2, 1}, kS, 5), nullptr);
  EXPECT_EQ(t.find({2, 2}, kS, 5), nullptr);
  EXPECT_EQ(t.size(), 1u);
  DedupeTable off(0);
  off.put({1, 1}, kS, 5, {});
  EXPECT_EQ(off.size(), 0u);
}

TEST(RpcDedupe, AnswersOnlyTheSameSessionAndMethod) {
  DedupeTable t(4);
  t.put({1, 1}, 10, 5, {std::byte{1}});
  EXPECT_NE(t.find({1, 1}, 10, 5), nullptr);
  EXPECT_EQ(t.find({1, 1}, 11, 5), nullptr);  // another session of the peer
  EXPECT_EQ(t.find({1, 1}, 10, 6), nullptr);  // another method
  t.erase({1, 1});
  EXPECT_EQ(t.find({1, 1}, 10, 5), nullptr);
  // Erased and replaced entries leave stale eviction slots: the live entries are still
  // the newest four, and the slots stay bounded.
  for (std::uint64_t id = 1; id <= 1000; ++id) {
    t.put({1, id}, 10, 5, {});
    if (id % 2 == 0) t.erase({1, id - 1});
  }
  EXPECT_LE(t.size(), 4u);
  EXPECT_NE(t.find({1, 1000}, 10, 5), nullptr);
}

}  // namespace
}  // namespace rmsg::rpc
