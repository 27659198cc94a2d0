// RPC over the loopback stream and a manual clock: calls and replies in any order, every
// reply status, deadlines (and that an expired request is not run after the server comes
// back), cancel, one-way messages, session resets, the dedupe table, and a raw peer's
// zero-budget request.
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "rpc/rpc_loopback_fixture.h"
#include "wire/rpc_wire.h"

namespace rmsg::testing {
namespace {

using std::chrono::milliseconds;
using Kind = SessionEvent::Kind;

TEST_F(RpcLoopbackTest, ManyOutstandingCallsRepliedInReverseOrder) {
  start_both();
  std::vector<CallId> ids;
  for (int i = 0; i < 16; ++i) ids.push_back(call(kHold, "req" + std::to_string(i)).value());
  ASSERT_TRUE(run([&] { return held_.size() == 16; }));
  EXPECT_TRUE(done_.empty());
  for (int i = 15; i >= 0; --i) {
    held_[static_cast<std::size_t>(i)].ok(bytes_of("rep" + std::to_string(i)));
  }
  ASSERT_TRUE(run([&] { return done_.size() == 16; }));
  for (int i = 0; i < 16; ++i) {
    const RpcResponse& r = done_[ids[static_cast<std::size_t>(i)]];
    EXPECT_FALSE(r.error) << r.error.message();
    EXPECT_EQ(r.id, ids[static_cast<std::size_t>(i)]);  // a response names its call
    EXPECT_EQ(string_of(r.body), "rep" + std::to_string(i));
  }
  const auto st = a_.ep->peer_stats(kB);
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->calls, 16u);
  EXPECT_EQ(st->ok, 16u);
  EXPECT_EQ(st->outstanding, 0u);
  ASSERT_NE(st->latency, nullptr);
  EXPECT_EQ(st->latency->count(), 16u);
  EXPECT_EQ(b_.ep->peer_stats(kA)->served, 16u);
}

TEST_F(RpcLoopbackTest, EveryReplyStatusReachesTheCaller) {
  start(a_, kPortA, rpc_options(kA));
  RpcOptions ob = rpc_options(kB);
  ob.max_request_size = 100;
  start_b(ob);
  ASSERT_TRUE(a_.ep->messenger().add_peer(kB, loopback_params(kPortB)).ok());
  b_.ep->handle(3, [](const RpcRequest&, RpcResponder reply) { reply.error(42, bytes_of("no")); });
  b_.ep->handle(4, [](const RpcRequest&, RpcResponder) {});  // dropped unanswered
  const CallId ok = call(kEcho, "hi").value();
  const CallId unknown = call(99, "x").value();
  const CallId large = call(kEcho, std::string(101, 'x')).value();
  const CallId failed = call(3, "x").value();
  const CallId dropped = call(4, "x").value();
  ASSERT_TRUE(run([&] { return done_.size() == 5; }));
  EXPECT_FALSE(done_[ok].error);
  EXPECT_EQ(string_of(done_[ok].body), "hi");
  EXPECT_EQ(done_[unknown].error, make_error_code(RpcErrc::unknown_method));
  EXPECT_EQ(done_[large].error, make_error_code(RpcErrc::too_large));
  EXPECT_EQ(done_[failed].error, make_error_code(RpcErrc::handler_error));
  EXPECT_EQ(done_[failed].app_code, 42u);
  EXPECT_EQ(string_of(done_[failed].body), "no");
  EXPECT_EQ(done_[dropped].error, make_error_code(RpcErrc::handler_error));
  EXPECT_EQ(done_[dropped].app_code, 0u);
  b_.ep->shutdown();
  const CallId late = call(kEcho, "x").value();
  ASSERT_TRUE(run([&] { return completed(late); }));
  EXPECT_EQ(done_[late].error, make_error_code(RpcErrc::shutting_down));
  for (const CallId id : {ok, unknown, large, failed, dropped, late}) EXPECT_EQ(done_[id].id, id);
  // Refused before anything is sent.
  EXPECT_EQ(call(kEcho, "x", Duration{0}).error(), make_error_code(RpcErrc::timeout));
  const std::size_t max_body = rpc_options(kA).messenger.max_message_size - wire::RpcHeader::kSize;
  EXPECT_EQ(call(kEcho, std::string(max_body + 1, 'x')).error(),
            make_error_code(RpcErrc::too_large));
}

TEST_F(RpcLoopbackTest, ExpiredCallIsNotRunWhenTheServerComesLater) {
  start(a_, kPortA, rpc_options(kA));
  ASSERT_TRUE(a_.ep->messenger().add_peer(kB, loopback_params(kPortB)).ok());
  const CallId id = call(kEcho, "late", milliseconds(100)).value();  // B is not up
  ASSERT_TRUE(run([&] { return completed(id); }));
  // At its deadline, with why B could not be reached.
  EXPECT_EQ(done_[id].error, make_error_code(Errc::connection_refused));
  EXPECT_GE(done_[id].latency, milliseconds(100));
  EXPECT_EQ(a_.counter("rpc.withdrawn"), 1u);
  start_b(rpc_options(kB));  // B comes up: A's session connects and sends what it holds
  const CallId next = call(kEcho, "fresh").value();
  ASSERT_TRUE(run([&] { return completed(next); }));
  EXPECT_FALSE(done_[next].error);
  EXPECT_EQ(runs_, 1);  // only the fresh call ran
  EXPECT_EQ(b_.counter("rpc.withdrawn_seen"), 1u);
  EXPECT_EQ(a_.ep->peer_stats(kB)->timeouts, 1u);
}

TEST_F(RpcLoopbackTest, TimeoutWhileTheHandlerHoldsTheCall) {
  start_both();
  const CallId id = call(kHold, "slow", milliseconds(50)).value();
  ASSERT_TRUE(run([&] { return completed(id); }));
  EXPECT_EQ(done_[id].error, make_error_code(RpcErrc::timeout));
  ASSERT_EQ(held_.size(), 1u);
  held_[0].ok(bytes_of("too late"));
  ASSERT_TRUE(run([&] { return a_.counter("rpc.late_replies") == 1; }));
  EXPECT_EQ(done_.size(), 1u);
}

TEST_F(RpcLoopbackTest, AShortDeadlineBehindLongOnesExpiresOnTime) {
  // One timer serves every deadline: a call with less time than those before it must
  // re-arm it, and completed calls' deadlines must not fire anything.
  start_both();
  std::vector<CallId> slow;
  for (int i = 0; i < 5; ++i) slow.push_back(call(kHold, "long", std::chrono::seconds(30)).value());
  const auto t0 = loop_->now();
  const CallId quick = call(kHold, "short", milliseconds(40)).value();
  ASSERT_TRUE(run([&] { return completed(quick); }));
  EXPECT_EQ(done_[quick].error, make_error_code(RpcErrc::timeout));
  EXPECT_GE(loop_->now() - t0, milliseconds(40));
  EXPECT_LT(loop_->now() - t0, milliseconds(1000));
  for (CallId id : slow) EXPECT_FALSE(completed(id));
  for (auto& r : held_) r.ok(bytes_of("done"));
  ASSERT_TRUE(run([&] { return completed(slow.back()); }));
  for (CallId id : slow) EXPECT_FALSE(done_[id].error) << id;
}

TEST_F(RpcLoopbackTest, CancelCompletesAtOnceAndTheServerSeesIt) {
  start_both();
  const CallId id = call(kHold, "x").value();
  ASSERT_TRUE(run([&] { return held_.size() == 1; }));
  EXPECT_TRUE(a_.ep->cancel(id));
  ASSERT_TRUE(completed(id));  // inside cancel()
  EXPECT_EQ(done_[id].error, make_error_code(RpcErrc::cancelled));
  EXPECT_FALSE(a_.ep->cancel(id));
  ASSERT_TRUE(run([&] { return held_[0].cancelled(); }));
  held_[0].ok();
  EXPECT_EQ(b_.counter("rpc.server.reply_dropped"), 1u);
  EXPECT_EQ(a_.ep->peer_stats(kB)->cancelled, 1u);
}

// A responder's state is recycled once answered (rpc_server.cc, take_state): the next
// request's must not inherit the cancelled flag of a cancelled one.
TEST_F(RpcLoopbackTest, ARecycledResponderStartsUncancelled) {
  start_both();
  const CallId first = call(kHold, "x").value();
  ASSERT_TRUE(run([&] { return held_.size() == 1; }));
  EXPECT_TRUE(a_.ep->cancel(first));
  ASSERT_TRUE(run([&] { return held_[0].cancelled(); }));
  held_[0].ok();
  for (int i = 0; i < 3; ++i) {
    const CallId next = call(kHold, "y").value();
    ASSERT_TRUE(run([&] { return held_.size() == static_cast<std::size_t>(i) + 2; }));
    EXPECT_FALSE(held_.back().cancelled()) << i;
    held_.back().ok(bytes_of("fine"));
    ASSERT_TRUE(run([&] { return completed(next); }));
    EXPECT_FALSE(done_[next].error) << i;
  }
  EXPECT_EQ(b_.counter("rpc.server.reply_dropped"), 1u);
}

TEST_F(RpcLoopbackTest, OnewayMessagesArriveInOrderWithCalls) {
  start_both();
  std::vector<std::string> seen;
  b_.ep->handle_oneway(7, [&](const RpcRequest& r) { seen.push_back(string_of(r.body)); });
  b_.ep->handle(kEcho, [&](const RpcRequest& r, RpcResponder reply) {
    seen.push_back("call:" + string_of(r.body));
    reply.ok();
  });
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(a_.ep->notify(kB, 7, bytes_of(std::to_string(i))).ok());
  const CallId id = call(kEcho, "end").value();
  ASSERT_TRUE(run([&] { return completed(id); }));
  ASSERT_EQ(seen.size(), 51u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(seen[static_cast<std::size_t>(i)], std::to_string(i));
  EXPECT_EQ(seen[50], "call:end");
  EXPECT_EQ(b_.ep->peer_stats(kA)->oneway_received, 50u);
  EXPECT_EQ(a_.ep->peer_stats(kB)->oneway_sent, 50u);
}

// The handler runs in place (no copy per request): one that replaces itself must still
// find its captures (ASan's tree sees a use after free otherwise), and the next request
// gets the new one.
TEST_F(RpcLoopbackTest, HandlerThatReplacesItselfKeepsRunning) {
  start_both();
  constexpr std::uint32_t kSelf = 9;
  const std::string first(64, 'a');  // on the heap: a freed capture would be read freed
  b_.ep->handle(kSelf, [this, first](const RpcRequest&, RpcResponder reply) {
    b_.ep->handle(kSelf, [](const RpcRequest&, RpcResponder r) { r.ok(bytes_of("second")); });
    reply.ok(bytes_of(first));
  });
  const CallId one = call(kSelf, "1").value();
  ASSERT_TRUE(run([&] { return completed(one); }));
  const CallId two = call(kSelf, "2").value();
  ASSERT_TRUE(run([&] { return completed(two); }));
  EXPECT_EQ(string_of(done_[one].body), first);
  EXPECT_EQ(string_of(done_[two].body), "second");
}

TEST_F(RpcLoopbackTest, ServerRestartFailsOutstandingCallsAsSessionReset) {
  start_both();
  const CallId id = call(kHold, "x", std::chrono::seconds(30)).value();
  ASSERT_TRUE(run([&] { return held_.size() == 1; }));
  b_.ep.reset();  // B goes with the call held: its responder's answer goes nowhere
  held_.clear();
  start_b(rpc_options(kB));  // back with a new session: A's reconnect is a reset
  const CallId queued = call(kEcho, "queued in the old session").value();
  ASSERT_TRUE(run([&] { return completed(id) && completed(queued); }));
  EXPECT_EQ(done_[id].error, make_error_code(RpcErrc::session_reset));
  EXPECT_EQ(done_[queued].error, make_error_code(RpcErrc::session_reset));
  EXPECT_EQ(a_.count(Kind::reset), 1);
  const CallId fresh = call(kEcho, "new session").value();
  ASSERT_TRUE(run([&] { return completed(fresh); }));
  EXPECT_FALSE(done_[fresh].error);
  EXPECT_EQ(a_.ep->peer_stats(kB)->outstanding, 0u);
}

TEST_F(RpcLoopbackTest, SessionResetFailsEveryCallOfThatPeer) {
  start_both();
  std::vector<CallId> ids;
  for (int i = 0; i < 8; ++i) ids.push_back(call(kHold, "x", std::chrono::seconds(30)).value());
  ASSERT_TRUE(run([&] { return held_.size() == 8; }));
  b_.ep->messenger().mark_down(kA);  // B forgets A: A's reconnect is a reset
  ASSERT_TRUE(run([&] { return done_.size() == 8; }));
  for (CallId id : ids) EXPECT_EQ(done_[id].error, make_error_code(RpcErrc::session_reset));
  EXPECT_EQ(a_.count(Kind::reset), 1);
  EXPECT_EQ(a_.ep->peer_stats(kB)->outstanding, 0u);
  EXPECT_EQ(a_.ep->peer_stats(kB)->failed, 8u);
}

TEST_F(RpcLoopbackTest, AReplyThatBreaksTheConnectionDoesNotRunTheRequestTwice) {
  start_both();
  int runs = 0;
  b_.ep->handle(6, [&](const RpcRequest& r, RpcResponder reply) {
    ++runs;
    // The reply's write fails the connection inside the messenger's dispatch; the
    // request must still count as delivered, or A's replay runs it again.
    if (runs == 1) b_.accept_faults->reset();
    reply.ok(r.body);
  });
  const CallId id = call(6, "once").value();
  // Until B acknowledged A's request too (a replay of it has been through B's dispatch).
  ASSERT_TRUE(run([&] {
    return completed(id) && a_.ep->messenger().session_info(kB).value().queued == 0 &&
           b_.ep->messenger().session_info(kA).value().queued == 0;
  }));
  EXPECT_FALSE(done_[id].error) << done_[id].error.message();
  EXPECT_EQ(runs, 1);
  EXPECT_GE(a_.count(Kind::disconnected), 1);
  EXPECT_EQ(a_.count(Kind::reset), 0);
}

TEST_F(RpcLoopbackTest, ARestartedCallerNeverGetsItsPredecessorsReply) {
  start_both();
  const CallId old_id = call(kHold, "old").value();
  ASSERT_TRUE(run([&] { return held_.size() == 1; }));
  a_.ep.reset();  // A restarts: same node, new session; its ids start at 1 again
  start(a_, kPortA, rpc_options(kA));
  ASSERT_TRUE(a_.ep->messenger().add_peer(kB, loopback_params(kPortB)).ok());
  done_.clear();
  const CallId new_id = call(kHold, "new").value();
  EXPECT_EQ(new_id, old_id);
  ASSERT_TRUE(run([&] { return held_.size() == 2 && b_.count(Kind::reset) == 1; }));
  held_[0].ok(bytes_of("reply to the old call"));
  held_[1].ok(bytes_of("reply to the new call"));
  ASSERT_TRUE(run([&] { return completed(new_id); }));
  EXPECT_FALSE(done_[new_id].error);
  EXPECT_EQ(string_of(done_[new_id].body), "reply to the new call");
  EXPECT_EQ(b_.counter("rpc.server.reply_dropped"), 1u);
}

TEST_F(RpcLoopbackTest, DedupeTableAnswersARetryWithoutRunningAgain) {
  start_both();
  int runs = 0;
  b_.ep->handle(5,
                [&](const RpcRequest&, RpcResponder reply) {
                  ++runs;
                  reply.ok(bytes_of("run " + std::to_string(runs)));
                },
                {.dedupe = true});
  const CallId first = call(5, "put").value();
  ASSERT_TRUE(run([&] { return completed(first); }));
  const CallId retry = call(5, "put", std::chrono::seconds(5), first).value();
  EXPECT_EQ(retry, first);
  done_.erase(first);
  ASSERT_TRUE(run([&] { return completed(retry); }));
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(string_of(done_[retry].body), "run 1");
  EXPECT_EQ(b_.counter("rpc.server.dedupe_hits"), 1u);
  // An id still outstanding cannot be reused.
  const CallId held = call(kHold, "x").value();
  EXPECT_EQ(call(kEcho, "x", std::chrono::seconds(5), held).error(),
            make_error_code(Errc::invalid_argument));
}

TEST_F(RpcLoopbackTest, ServerRefusesARequestWithoutBudget) {
  start_b(rpc_options(kB));
  // A raw messenger speaks the RPC header itself.
  std::vector<std::vector<std::byte>> got;
  auto m = MessengerAccess::create(
      *loop_, rpc_options(kA).messenger,
      std::make_unique<LoopbackStreams>(*loop_, std::make_shared<LoopbackFaults>(),
                                        std::make_shared<LoopbackFaults>()),
      [&](NodeId, std::span<const std::byte> p) { got.emplace_back(p.begin(), p.end()); }, {});
  ASSERT_TRUE(m.ok());
  auto& raw = *m.value();
  ASSERT_TRUE(raw.add_peer(kB, loopback_params(kPortB)).ok());
  wire::RpcHeader h;
  h.kind = wire::RpcKind::request;
  h.word = kEcho;
  h.id = 9;
  h.budget_us = 0;
  ASSERT_TRUE(raw.send(kB, wire::encode_rpc(h, {})).ok());
  ASSERT_TRUE(raw.send(kB, std::vector<std::byte>(30, std::byte{0xff})).ok());  // not RPC
  h.id = 10;
  h.budget_us = wire::kNoBudget;
  ASSERT_TRUE(raw.send(kB, wire::encode_rpc(h, bytes_of("ok"))).ok());
  ASSERT_TRUE(run([&] { return got.size() == 2; }));
  const auto r0 = wire::decode_rpc(got[0]);
  ASSERT_TRUE(r0.has_value());
  EXPECT_EQ(r0->kind, wire::RpcKind::reply);
  EXPECT_EQ(r0->id, 9u);
  EXPECT_EQ(r0->status, wire::RpcStatus::timeout);
  const auto r1 = wire::decode_rpc(got[1]);
  ASSERT_TRUE(r1.has_value());
  EXPECT_EQ(r1->id, 10u);
  EXPECT_EQ(r1->status, wire::RpcStatus::ok);
  EXPECT_EQ(runs_, 1);
  EXPECT_EQ(b_.counter("rpc.server.expired"), 1u);
  EXPECT_EQ(b_.counter("rpc.bad_messages"), 1u);
  m.value().reset();
}

// Graceful shutdown (include/rmsg/rpc.h, Flow control): calls in flight both ways at
// shutdown complete (ok, or shutting_down for what arrives meanwhile), none hangs, and the
// peer sees a close frame, not a reset.
TEST_F(RpcLoopbackTest, GracefulShutdownDrainsCallsBothWays) {
  start_both();
  constexpr std::uint32_t kSlow = 7;  // A holds these responders
  std::vector<RpcResponder> a_held;
  a_.ep->handle(kSlow,
                [&](const RpcRequest&, RpcResponder reply) { a_held.push_back(std::move(reply)); });
  std::vector<CallId> ids;
  for (int i = 0; i < 10; ++i) ids.push_back(call(kEcho, "e").value());
  for (int i = 0; i < 5; ++i) ids.push_back(call(kHold, "h").value());
  std::map<int, RpcResponse> b_done;
  const auto b_call = [&](int n) {
    auto r = b_.ep->call(kA, kSlow, bytes_of("s"), {.deadline = loop_->now() + milliseconds(5000)},
                         [&b_done, n](RpcResponse resp) { b_done[n] = std::move(resp); });
    ASSERT_TRUE(r.ok());
  };
  ASSERT_TRUE(run([&] { return held_.size() == 5 && done_.size() == 10; }));
  for (int n = 0; n < 3; ++n) b_call(n);
  ASSERT_TRUE(run([&] { return a_held.size() == 3; }));

  bool finished = false;
  const auto t0 = loop_->now();
  a_.ep->shutdown(t0 + std::chrono::seconds(2), [&] { finished = true; });
  EXPECT_FALSE(finished);
  EXPECT_EQ(call(kEcho, "late").error(), make_error_code(RpcErrc::shutting_down));
  b_call(3);  // arrives meanwhile: answered shutting_down
  ASSERT_TRUE(run([&] { return b_done.contains(3); }));
  EXPECT_EQ(b_done[3].error, make_error_code(RpcErrc::shutting_down));
  loop_->run_for([] { return false; }, milliseconds(100));
  EXPECT_FALSE(finished);  // both sides still hold responders
  for (auto& r : held_) r.ok(bytes_of("late ok"));
  for (auto& r : a_held) r.ok();
  ASSERT_TRUE(run([&] { return finished; }));
  for (CallId id : ids) {
    ASSERT_TRUE(completed(id));
    EXPECT_FALSE(done_[id].error) << done_[id].error.message();
  }
  for (int n = 0; n < 3; ++n) EXPECT_FALSE(b_done[n].error) << b_done[n].error.message();
  EXPECT_LT(loop_->now() - t0, std::chrono::seconds(2));  // drained, not timed out
  ASSERT_TRUE(run([&] { return b_.count(Kind::disconnected) >= 1; }));
  EXPECT_EQ(b_.events.back().error, make_error_code(MessengerErrc::peer_closed));
  EXPECT_EQ(b_.count(Kind::reset), 0);
  EXPECT_EQ(b_.ep->messenger().counters().value("msg.errors.stream"), 0u);
}

TEST_F(RpcLoopbackTest, GracefulShutdownFailsWhatTheDeadlineLeaves) {
  start_both();
  std::vector<CallId> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(call(kHold, "h").value());
  ASSERT_TRUE(run([&] { return held_.size() == 3; }));
  bool finished = false;
  const auto t0 = loop_->now();
  a_.ep->shutdown(t0 + milliseconds(500), [&] { finished = true; });
  ASSERT_TRUE(run([&] { return finished; }));
  EXPECT_GE(loop_->now() - t0, milliseconds(500));
  EXPECT_LT(loop_->now() - t0, milliseconds(600));
  for (CallId id : ids) {
    ASSERT_TRUE(completed(id));
    EXPECT_EQ(done_[id].error, make_error_code(RpcErrc::shutting_down));
  }
  for (auto& r : held_) r.ok();  // too late: the replies go nowhere, nothing breaks
  loop_->run_for([] { return false; }, milliseconds(100));
  bool again = false;
  a_.ep->shutdown(loop_->now(), [&] { again = true; });  // a second call: done runs still
  ASSERT_TRUE(run([&] { return again; }));
}

// Bounded dispatch (RpcOptions::max_pending_requests): past the bound the server stops
// reading the caller's connection; the requests wait on the caller's side (its queue is
// not acknowledged) and every one is served once responders complete.
TEST_F(RpcLoopbackTest, PendingRequestBoundStopsReadingUntilResponsesComplete) {
  start(a_, kPortA, rpc_options(kA));
  RpcOptions ob = rpc_options(kB);
  ob.max_pending_requests = 4;
  start_b(ob);
  ASSERT_TRUE(a_.ep->messenger().add_peer(kB, loopback_params(kPortB)).ok());
  std::vector<CallId> ids;
  for (int i = 0; i < 50; ++i) {
    ids.push_back(call(kHold, std::to_string(i), std::chrono::seconds(300)).value());
  }
  ASSERT_TRUE(run([&] { return held_.size() == 4; }));
  loop_->run_for([] { return false; }, std::chrono::seconds(30));  // idle timeouts included
  EXPECT_EQ(held_.size(), 4u);  // no more dispatched while 4 are pending
  EXPECT_GE(a_.ep->messenger().session_info(kB)->queued, 46u);  // waiting at the caller
  EXPECT_EQ(b_.ep->messenger().counters().value("msg.errors.idle_timeout"), 0u);
  EXPECT_EQ(a_.count(Kind::disconnected), 0);
  std::size_t max_held = 0;
  std::size_t answered = 0;
  ASSERT_TRUE(run([&] {
    max_held = std::max(max_held, held_.size() - answered);
    if (answered < held_.size()) held_[answered++].ok(bytes_of("r"));
    return done_.size() == 50;
  }));
  EXPECT_LE(max_held, 4u);
  EXPECT_EQ(runs_, 50);
  for (CallId id : ids) EXPECT_FALSE(done_[id].error) << done_[id].error.message();
  EXPECT_GE(b_.ep->counters().value("rpc.server.read_paused"), 2u);
}

}  // namespace
}  // namespace rmsg::testing
