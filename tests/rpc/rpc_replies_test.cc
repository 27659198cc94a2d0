// Replies are never dropped (src/rpc/rpc_replies.cc): a reply that can never fit the
// server's queue fails its call with a named error (too_large), not a timeout. (Many
// concurrent large reads that overflow the queue: rpc_replies_tcp_test.cc.)
#include <gtest/gtest.h>

#include <chrono>

#include "rpc/rpc_loopback_fixture.h"

namespace rmsg::testing {
namespace {

constexpr std::uint32_t kGet = 7;
constexpr std::size_t kMiB = std::size_t{1} << 20;

TEST_F(RpcLoopbackTest, AReplyThatCanNeverFitFailsItsCallAsTooLarge) {
  start(a_, kPortA, rpc_options(kA));
  RpcOptions ob = rpc_options(kB);
  ob.messenger.session_max_bytes = kMiB;  // a reply of 2 MiB never fits B's queue
  start_b(ob);
  ASSERT_TRUE(a_.ep->messenger().add_peer(kB, loopback_params(kPortB)).ok());
  const std::vector<std::byte> big(2 * kMiB, std::byte{'v'});
  const std::vector<std::byte> over(ob.messenger.max_message_size + 1, std::byte{'v'});
  b_.ep->handle(kGet, [&](const RpcRequest& r, RpcResponder reply) {
    reply.ok(string_of(r.body) == "big" ? big : over);
  });
  const CallId a = call(kGet, "big").value();
  const CallId b = call(kGet, "over").value();
  const CallId c = call(kEcho, "small").value();
  ASSERT_TRUE(run([&] { return done_.size() == 3; }));
  EXPECT_EQ(done_[a].error, make_error_code(RpcErrc::too_large));
  EXPECT_EQ(done_[b].error, make_error_code(RpcErrc::too_large));
  EXPECT_FALSE(done_[c].error);
  EXPECT_EQ(b_.counter("rpc.server.reply_too_large"), 2u);
}

}  // namespace
}  // namespace rmsg::testing
