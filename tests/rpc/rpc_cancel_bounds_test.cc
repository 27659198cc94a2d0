// RPC over the loopback stream and a manual clock, issue 16's functional gaps: a cancel
// that overtakes its large request (the early-cancel table, its bound and pruning), the
// endpoint-wide bound on pending requests (max_pending_requests_total: callers held
// back, waiting requests cancelled or shut down), and cancel() for a call kept in the
// call-state overflow.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "rpc/rpc_loopback_fixture.h"
#include "wire/rpc_wire.h"

namespace rmsg::testing {
namespace {

// A cancel that overtakes its request (RpcOptions::max_early_cancels): a 4 MiB request is
// on the bulk lane in 64 KiB chunks when its call is cancelled, and the cancel (priority
// lane) reaches B first. B remembers it and drops the request when it arrives: the
// handler never runs, nothing is answered.
TEST_F(RpcLoopbackTest, ACancelThatOvertakesItsLargeRequestDropsIt) {
  start_both();
  const CallId warm = call(kEcho, "warm").value();  // the session is open: writes start at once
  ASSERT_TRUE(run([&] { return completed(warm); }));
  const std::string big((std::size_t{4} << 20) - 64, 'x');
  const CallId id = call(kHold, big).value();
  EXPECT_TRUE(a_.ep->cancel(id));
  ASSERT_TRUE(completed(id));
  EXPECT_EQ(done_[id].error, make_error_code(RpcErrc::cancelled));
  // A large call behind it on the same lane: once it is answered, the first arrived.
  const CallId after = call(kEcho, big).value();
  ASSERT_TRUE(run([&] { return completed(after); }));
  EXPECT_FALSE(done_[after].error);
  EXPECT_TRUE(held_.empty());  // the cancelled request's handler never ran
  EXPECT_EQ(runs_, 2);
  EXPECT_EQ(b_.counter("rpc.server.early_cancels"), 1u);
  EXPECT_EQ(b_.counter("rpc.server.cancelled_unrun"), 1u);
  EXPECT_EQ(a_.counter("rpc.late_replies"), 0u);
}

// The table of early cancels is bounded per peer: past max_early_cancels the lowest id is
// forgotten; a cancel that crossed its reply leaves an id that a later large request
// clears (the bulk lane's order). A retry that reuses a remembered id runs.
TEST_F(RpcLoopbackTest, EarlyCancelsAreBoundedAndPruned) {
  start(a_, kPortA, rpc_options(kA));
  RpcOptions ob = rpc_options(kB);
  ob.max_early_cancels = 2;
  start_b(ob);
  ASSERT_TRUE(a_.ep->messenger().add_peer(kB, loopback_params(kPortB)).ok());
  // Calls 1-5, answered; then cancels of 2, 3 and 4 as if each had crossed its reply
  // (raw cancel messages from A's messenger).
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(call(kEcho, "e").ok());
  ASSERT_TRUE(run([&] { return done_.size() == 5; }));
  for (CallId stale : {CallId{2}, CallId{3}, CallId{4}}) {
    wire::RpcHeader h;
    h.kind = wire::RpcKind::cancel;
    h.id = stale;
    ASSERT_TRUE(a_.ep->messenger().send(kB, wire::encode_rpc(h, {})).ok());
  }
  ASSERT_TRUE(run([&] { return b_.counter("rpc.server.early_cancels") == 3; }));
  EXPECT_EQ(b_.counter("rpc.server.early_cancels_forgotten"), 1u);  // 2: past the bound
  // A retry (flag set) of a remembered id runs, and clears it.
  wire::RpcHeader r;
  r.kind = wire::RpcKind::request;
  r.flags = wire::kRpcFlagDedupe;
  r.word = kEcho;
  r.id = 3;
  r.budget_us = wire::kNoBudget;
  ASSERT_TRUE(a_.ep->messenger().send(kB, wire::encode_rpc(r, bytes_of("retry"))).ok());
  ASSERT_TRUE(run([&] { return runs_ == 6; }));
  // A large request with a higher id (6) clears the lower one left (4).
  const CallId big = call(kEcho, std::string(std::size_t{1} << 20, 'y')).value();
  ASSERT_TRUE(run([&] { return completed(big); }));
  EXPECT_FALSE(done_[big].error);
  EXPECT_EQ(runs_, 7);
  EXPECT_EQ(b_.counter("rpc.server.early_cancels_forgotten"), 2u);  // and 4
  EXPECT_EQ(b_.counter("rpc.server.cancelled_unrun"), 0u);
}

// The endpoint-wide bound (RpcOptions::max_pending_requests_total): three callers, 12
// calls each, B holds every responder; never more than 5 requests are in B's handlers,
// the rest wait (at the callers, and one per caller at B), and all complete once B
// answers.
TEST_F(RpcLoopbackTest, EndpointWidePendingBoundHoldsAcrossCallers) {
  RpcOptions ob = rpc_options(kB);
  ob.max_pending_requests_total = 5;
  start_b(ob);
  start(a_, kPortA, rpc_options(kA));
  RpcSide c, d;
  start(c, 7103, rpc_options(3));
  start(d, 7104, rpc_options(4));
  std::vector<RpcEndpoint*> callers{a_.ep.get(), c.ep.get(), d.ep.get()};
  int ok = 0, failed = 0;
  for (RpcEndpoint* e : callers) {
    ASSERT_TRUE(e->messenger().add_peer(kB, loopback_params(kPortB)).ok());
    for (int i = 0; i < 12; ++i) {
      ASSERT_TRUE(e->call(kB, kHold, bytes_of(std::to_string(i)),
                          {.deadline = loop_->now() + std::chrono::seconds(300)},
                          [&](RpcResponse r) { (r.error ? failed : ok) += 1; })
                      .ok());
    }
  }
  ASSERT_TRUE(run([&] { return held_.size() == 5; }));
  loop_->run_for([] { return false; }, std::chrono::seconds(30));  // idle timeouts included
  EXPECT_EQ(held_.size(), 5u);  // no more handed out while 5 are pending
  EXPECT_GE(b_.counter("rpc.server.deferred"), 1u);
  EXPECT_GE(b_.counter("rpc.server.read_paused"), 1u);
  std::size_t max_held = 0;
  std::size_t answered = 0;
  ASSERT_TRUE(run([&] {
    max_held = std::max(max_held, held_.size() - answered);
    if (answered < held_.size()) held_[answered++].ok(bytes_of("r"));
    return ok + failed == 36;
  }));
  EXPECT_LE(max_held, 5u);
  EXPECT_EQ(ok, 36);
  EXPECT_EQ(runs_, 36);
  EXPECT_EQ(b_.ep->messenger().counters().value("msg.errors.idle_timeout"), 0u);
  held_.clear();
  c.ep.reset();
  d.ep.reset();
}

// Requests waiting for room under max_pending_requests_total. Their peer is not read
// while they wait, so a cancel of one is read once room comes, and the request, which
// runs one turn later, is dropped unrun; shutdown answers the waiting ones shutting_down.
TEST_F(RpcLoopbackTest, WaitingRequestsCancelledOrShutDown) {
  start(a_, kPortA, rpc_options(kA));
  RpcOptions ob = rpc_options(kB);
  ob.max_pending_requests_total = 1;
  start_b(ob);
  ASSERT_TRUE(a_.ep->messenger().add_peer(kB, loopback_params(kPortB)).ok());
  const CallId first = call(kHold, "1").value();
  const CallId second = call(kHold, "2").value();
  ASSERT_TRUE(run([&] { return b_.counter("rpc.server.deferred") == 1; }));
  EXPECT_EQ(held_.size(), 1u);
  EXPECT_TRUE(a_.ep->cancel(second));
  held_[0].ok(bytes_of("r"));  // room: the second gets it, A's cancel is read first
  ASSERT_TRUE(run([&] { return completed(first); }));
  ASSERT_TRUE(run([&] { return b_.counter("rpc.server.cancelled_unrun") == 1; }));
  EXPECT_EQ(runs_, 1);
  const CallId third = call(kHold, "3").value();
  const CallId fourth = call(kHold, "4").value();
  ASSERT_TRUE(run([&] { return held_.size() == 2 && b_.counter("rpc.server.deferred") == 2; }));
  b_.ep->shutdown();
  ASSERT_TRUE(run([&] { return completed(fourth); }));
  EXPECT_EQ(done_[fourth].error, make_error_code(RpcErrc::shutting_down));
  EXPECT_EQ(runs_, 2);            // the waiting one never ran
  held_[1].ok(bytes_of("late"));  // the one in a handler still answers
  ASSERT_TRUE(run([&] { return completed(third); }));
  EXPECT_FALSE(done_[third].error);
  EXPECT_FALSE(done_[first].error);
}

// A call whose state slot is still taken by an older outstanding call (max_outstanding 64:
// 64 slots; call 65 shares call 1's) is kept in the overflow map, and cancel() still
// answers exactly for both.
TEST_F(RpcLoopbackTest, CancelIsExactForACallInTheOverflow) {
  RpcOptions oa = rpc_options(kA);
  oa.max_outstanding = 64;
  start(a_, kPortA, oa);
  start_b(rpc_options(kB));
  ASSERT_TRUE(a_.ep->messenger().add_peer(kB, loopback_params(kPortB)).ok());
  const CallId old = call(kHold, "old").value();
  for (int i = 0; i < 63; ++i) {
    const CallId e = call(kEcho, "e").value();
    ASSERT_TRUE(run([&] { return completed(e); }));
  }
  const CallId shared = call(kHold, "shares the slot").value();
  ASSERT_EQ(shared, old + 64);
  ASSERT_TRUE(run([&] { return held_.size() == 2; }));
  EXPECT_TRUE(a_.ep->cancel(shared));
  EXPECT_FALSE(a_.ep->cancel(shared));
  EXPECT_EQ(done_[shared].error, make_error_code(RpcErrc::cancelled));
  EXPECT_FALSE(completed(old));
  EXPECT_TRUE(a_.ep->cancel(old));
  EXPECT_EQ(done_[old].error, make_error_code(RpcErrc::cancelled));
  EXPECT_FALSE(a_.ep->cancel(old + 128));  // never given out
}

}  // namespace
}  // namespace rmsg::testing
