// The dedupe table answers only retries (CallOptions::retry_of) of the same method within
// the session they were made in: a caller that starts numbering its calls from 1 again (a
// restart the server does not see as one, a re-created endpoint) has its new calls run.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "rpc/rpc_loopback_fixture.h"

namespace rmsg::testing {
namespace {

using Kind = SessionEvent::Kind;
constexpr std::uint32_t kPut = 5;
constexpr std::uint32_t kOther = 6;

class RpcDedupeTest : public RpcLoopbackTest {
 protected:
  // B's put (deduplicated): answers "run N", N counting its runs.
  void serve_put(RpcEndpoint& ep) {
    for (std::uint32_t m : {kPut, kOther}) {
      ep.handle(m,
                [this](const RpcRequest&, RpcResponder reply) {
                  ++puts_;
                  reply.ok(bytes_of("run " + std::to_string(puts_)));
                },
                {.dedupe = true});
    }
  }
  // A restarts: its endpoint (and messenger) go and come back, numbering from 1 again.
  void restart_a(RpcOptions o) {
    a_.ep.reset();
    start(a_, kPortA, o);
    ASSERT_TRUE(a_.ep->messenger().add_peer(kB, loopback_params(kPortB)).ok());
    done_.clear();
  }
  RpcResponse put_once(CallId retry_of = 0, std::uint32_t method = kPut) {
    auto slot = std::make_shared<CallId>(0);
    auto id =
        a_.ep->call(kB, method, bytes_of("v"),
                    {.deadline = loop_->now() + std::chrono::seconds(5), .retry_of = retry_of},
                    [this, slot](RpcResponse r) { done_[*slot] = std::move(r); });
    EXPECT_TRUE(id.ok());
    if (!id) return {};
    *slot = id.value();
    last_id_ = id.value();
    EXPECT_TRUE(run([&] { return completed(*slot); }));
    RpcResponse r = std::move(done_[*slot]);
    done_.erase(*slot);
    return r;
  }
  int puts_ = 0;
  CallId last_id_ = 0;
};

TEST_F(RpcDedupeTest, ACallerRestartedAfterMarkDownHasItsPutRun) {
  start_both();
  serve_put(*b_.ep);
  EXPECT_EQ(string_of(put_once().body), "run 1");
  b_.ep->messenger().mark_down(kA);  // as after a failure: B forgets A, no reset event
  restart_a(rpc_options(kA));
  const RpcResponse r = put_once();
  EXPECT_FALSE(r.error) << r.error.message();
  EXPECT_EQ(last_id_, 1u);  // the same id as the old incarnation's put
  EXPECT_EQ(string_of(r.body), "run 2");
  EXPECT_EQ(puts_, 2);
  EXPECT_EQ(b_.counter("rpc.server.dedupe_hits"), 0u);
}

TEST_F(RpcDedupeTest, ACallerRestartedOverALossySessionHasItsPutRun) {
  RpcOptions oa = rpc_options(kA);
  oa.messenger.default_policy = SessionPolicy::lossy;
  RpcOptions ob = rpc_options(kB);
  ob.messenger.default_policy = SessionPolicy::lossy;
  start(a_, kPortA, oa);
  start_b(ob);
  ASSERT_TRUE(a_.ep->messenger().add_peer(kB, loopback_params(kPortB)).ok());
  serve_put(*b_.ep);
  EXPECT_EQ(string_of(put_once().body), "run 1");
  restart_a(oa);
  const RpcResponse r = put_once();
  EXPECT_FALSE(r.error) << r.error.message();
  EXPECT_EQ(string_of(r.body), "run 2");
  EXPECT_EQ(puts_, 2);
}

TEST_F(RpcDedupeTest, AReCreatedEndpointOnASharedMessengerHasItsPutRun) {
  start_both();
  constexpr ServiceId kSvc = 9;
  auto server = RpcEndpoint::create(b_.ep->messenger(), kSvc, rpc_options(kB));
  ASSERT_TRUE(server.ok());
  serve_put(**server);
  for (int round = 1; round <= 2; ++round) {
    // Same messenger, same session, a new endpoint: its call ids start at 1 again.
    auto client = RpcEndpoint::create(a_.ep->messenger(), kSvc, rpc_options(kA));
    ASSERT_TRUE(client.ok());
    std::optional<RpcResponse> got;
    auto id = (*client)->call(kB, kPut, bytes_of("v"),
                              {.deadline = loop_->now() + std::chrono::seconds(5)},
                              [&](RpcResponse r) { got = std::move(r); });
    ASSERT_TRUE(id.ok());
    EXPECT_EQ(id.value(), 1u);
    ASSERT_TRUE(run([&] { return got.has_value(); }));
    EXPECT_FALSE(got->error) << got->error.message();
    EXPECT_EQ(string_of(got->body), "run " + std::to_string(round));
  }
  EXPECT_EQ(puts_, 2);
  EXPECT_EQ((*server)->counters().value("rpc.server.dedupe_hits"), 0u);
}

TEST_F(RpcDedupeTest, AReCreatedEndpointGetsItsOwnReplyNotItsPredecessors) {
  start_both();
  constexpr ServiceId kSvc = 9;
  auto server = RpcEndpoint::create(b_.ep->messenger(), kSvc, rpc_options(kB));
  ASSERT_TRUE(server.ok());
  std::vector<RpcResponder> held;
  (*server)->handle(
      kPut, [&](const RpcRequest&, RpcResponder reply) { held.push_back(std::move(reply)); });
  std::vector<std::string> got;
  for (int round = 0; round < 2; ++round) {
    // The first endpoint goes with its call 1 still held by the server.
    auto client = RpcEndpoint::create(a_.ep->messenger(), kSvc, rpc_options(kA));
    ASSERT_TRUE(client.ok());
    auto id = (*client)->call(kB, kPut, bytes_of("v"),
                              {.deadline = loop_->now() + std::chrono::seconds(5)},
                              [&, round](RpcResponse r) {
                                if (round == 1) got.push_back(string_of(r.body));
                              });
    ASSERT_TRUE(id.ok());
    EXPECT_EQ(id.value(), 1u);
    ASSERT_TRUE(run([&] { return held.size() == static_cast<std::size_t>(round) + 1; }));
    if (round == 0) continue;
    held[0].ok(bytes_of("to the first endpoint"));
    held[1].ok(bytes_of("to the second endpoint"));
    ASSERT_TRUE(run([&] { return !got.empty(); }));
    loop_->run_for([] { return false; }, std::chrono::milliseconds(10));
  }
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], "to the second endpoint");
}

TEST_F(RpcDedupeTest, ARetryOfTheSameMethodInTheSessionIsAnsweredFromTheTable) {
  start_both();
  serve_put(*b_.ep);
  EXPECT_EQ(string_of(put_once().body), "run 1");
  const CallId first = last_id_;
  // A retry (the caller did not see the reply: a timeout, say): not run again.
  EXPECT_EQ(string_of(put_once(first).body), "run 1");
  EXPECT_EQ(puts_, 1);
  EXPECT_EQ(b_.counter("rpc.server.dedupe_hits"), 1u);
  // The same id retried as another method is not that call: it runs.
  EXPECT_EQ(string_of(put_once(first, kOther).body), "run 2");
  EXPECT_EQ(puts_, 2);
}

TEST_F(RpcDedupeTest, ARetryAfterAReconnectTheSessionSurvivedIsAnsweredFromTheTable) {
  start_both();
  serve_put(*b_.ep);
  EXPECT_EQ(string_of(put_once().body), "run 1");
  const CallId first = last_id_;
  a_.connect_faults->reset();  // the connection breaks; the lossless session carries on
  ASSERT_TRUE(run([&] { return a_.count(Kind::disconnected) >= 1; }));
  EXPECT_EQ(string_of(put_once(first).body), "run 1");
  EXPECT_EQ(puts_, 1);
  EXPECT_EQ(a_.count(Kind::reset), 0);
  EXPECT_EQ(b_.count(Kind::reset), 0);
}

TEST_F(RpcDedupeTest, AResetForAnyCauseForgetsThePeersReplies) {
  RpcOptions oa = rpc_options(kA);
  oa.messenger.default_policy = SessionPolicy::lossy;
  start(a_, kPortA, oa);
  RpcOptions ob = rpc_options(kB);
  ob.messenger.default_policy = SessionPolicy::lossy;
  start_b(ob);
  ASSERT_TRUE(a_.ep->messenger().add_peer(kB, loopback_params(kPortB)).ok());
  serve_put(*b_.ep);
  EXPECT_EQ(string_of(put_once().body), "run 1");
  const CallId first = last_id_;
  // The connection breaks: a lossy session resets on both sides (lossy_fault).
  a_.connect_faults->reset();
  ASSERT_TRUE(run([&] { return b_.count(Kind::reset) >= 1 && a_.count(Kind::reset) >= 1; }));
  // A retry in the next session runs again (at-least-once across a reset).
  EXPECT_EQ(string_of(put_once(first).body), "run 2");
  EXPECT_EQ(puts_, 2);
}

}  // namespace
}  // namespace rmsg::testing
