// Services: several users of one messenger share one session per peer (an RpcEndpoint and
// a raw-message user), each sees only its own messages and every session event; the
// message header's service field.
#include <gtest/gtest.h>

#include <thread>

#include "msg/messenger_loopback_fixture.h"
#include "rpc/rpc_fixture.h"
#include "wire/banner.h"
#include "wire/crc32c.h"
#include "wire/frame_encoder.h"
#include "wire/session_frames.h"

namespace rmsg::testing {
namespace {

using Kind = SessionEvent::Kind;
constexpr ServiceId kRpc = 7;

TEST(MessageHeaderService, SitsAtBytes20And21AndOldHeadersReadAsZero) {
  const auto b = wire::encode(wire::MessageHeader{1, 2, 0, 0xBEEF});
  EXPECT_EQ(b[20], std::byte{0xEF});
  EXPECT_EQ(b[21], std::byte{0xBE});
  EXPECT_EQ(b[22], std::byte{0});
  EXPECT_EQ(b[23], std::byte{0});
  auto copy = b;
  copy[22] = std::byte{0xFF};  // reserved: ignored
  EXPECT_EQ(wire::decode_message_header(copy)->service, 0xBEEF);
  EXPECT_EQ(wire::decode_message_header(wire::encode(wire::MessageHeader{1, 2, 0}))->service, 0);
}

class MessengerServicesTest : public MessengerLoopbackTest {};

TEST_F(MessengerServicesTest, RpcAndRawUserShareOneSessionAndSeeOnlyTheirOwn) {
  start_both();
  std::vector<SessionEvent> rpc_events_a;
  auto ra = RpcEndpoint::create(*a_.node.m, kRpc, rpc_options(kA),
                                [&](SessionEvent e) { rpc_events_a.push_back(std::move(e)); });
  auto rb = RpcEndpoint::create(*b_.node.m, kRpc, rpc_options(kB));
  ASSERT_TRUE(ra.ok() && rb.ok());
  int served = 0;
  (*rb)->handle(1, [&](const RpcRequest& req, RpcResponder reply) {
    ++served;
    reply.ok(req.body);
  });
  // The service is taken now.
  EXPECT_EQ(a_.node.m->attach(kRpc, [](NodeId, std::span<const std::byte>) {}).error(),
            make_error_code(Errc::invalid_argument));

  Completions done;
  std::vector<CallId> ids(5);
  for (int i = 0; i < 5; ++i) {
    auto id = (*ra)->call(kB, 1, bytes_of("call" + std::to_string(i)),
                          {.deadline = loop_->now() + std::chrono::seconds(10)},
                          done.callback_for(&ids[i]));
    ASSERT_TRUE(id.ok());
    ids[i] = *id;
  }
  send_a(10);
  send_b(3);
  ASSERT_TRUE(
      run([&] { return done.done.size() == 5 && b_has_all_from_a() && a_has_all_from_b(); }));
  for (int i = 0; i < 5; ++i) {
    EXPECT_FALSE(done.done[ids[i]].error) << done.done[ids[i]].error.message();
    EXPECT_EQ(string_of(done.done[ids[i]].body), "call" + std::to_string(i));
  }
  EXPECT_EQ(served, 5);
  // The raw users got their numbered messages only (no RPC bytes among them).
  EXPECT_EQ(b_.node.ledger.delivered, 10u);
  EXPECT_EQ(a_.node.ledger.delivered, 3u);
  expect_clean();
  // One session each side, shared.
  EXPECT_EQ(a_.node.counter("msg.sessions"), 1u);
  EXPECT_EQ(b_.node.counter("msg.sessions"), 1u);
  ASSERT_TRUE(a_.node.m->session_info(kB).has_value());
  EXPECT_TRUE(a_.node.m->session_info(kB)->connected);
  EXPECT_EQ(a_.node.m->session_info(kB)->delivered, 3u + 5u);  // raw + replies
  EXPECT_EQ(b_.node.counter("msg.unknown_service"), 0u);
  // Both users saw the session come up.
  EXPECT_EQ(a_.node.count(Kind::connected), 1);
  ASSERT_EQ(rpc_events_a.size(), 1u);
  EXPECT_EQ(rpc_events_a[0].kind, Kind::connected);
}

TEST_F(MessengerServicesTest, UnknownServiceIsDroppedAndCounted) {
  start_both();
  ASSERT_TRUE(a_.node.m->send(kB, numbered(1), 42).ok());
  ASSERT_TRUE(a_.node.send_next(kB).ok());
  ASSERT_TRUE(run([&] { return b_.node.ledger.delivered == 1; }));
  EXPECT_EQ(b_.node.counter("msg.unknown_service"), 1u);
  ASSERT_TRUE(run([&] { return a_.node.m->session_info(kB)->queued == 0; }));
}

TEST_F(MessengerServicesTest, ResetHandsEachUserItsOwnMessages) {
  start_both();
  std::vector<SessionEvent> second;
  ASSERT_TRUE(a_.node.m
                  ->attach(
                      9, [](NodeId, std::span<const std::byte>) {},
                      [&](SessionEvent e) { second.push_back(std::move(e)); })
                  .ok());
  a_.node.m->set_policy(kB, SessionPolicy::lossy);
  send_a(2);
  ASSERT_TRUE(run([&] { return b_.node.ledger.delivered == 2; }));
  // Queue one for each service, then lose the lossy connection before it is written.
  ASSERT_TRUE(a_.node.m->send(kB, numbered(100), 9).ok());
  ASSERT_TRUE(a_.node.send_next(kB).ok());
  b_.node.m.reset();  // the peer goes: a lossy session resets
  ASSERT_TRUE(run([&] { return a_.node.count(Kind::reset) == 1; }));
  ASSERT_FALSE(second.empty());
  const auto& mine = second.back();
  ASSERT_EQ(mine.kind, Kind::reset);
  ASSERT_EQ(mine.unknown.size() + mine.unsent.size(), 1u);
  EXPECT_EQ(index_of(mine.unknown.empty() ? mine.unsent[0] : mine.unknown[0]), 100u);
  EXPECT_TRUE(a_.node.handed_back[kB].contains(3));
  EXPECT_FALSE(a_.node.handed_back[kB].contains(100));
}

TEST_F(MessengerServicesTest, AUserMayDetachItselfInItsDispatch) {
  start_both();
  int got = 0;
  Messenger* b = b_.node.m.get();
  ASSERT_TRUE(b->attach(9, [&](NodeId, std::span<const std::byte>) {
                 ++got;
                 b->detach(9);  // its own std::function stays alive until it returns
               }).ok());
  ASSERT_TRUE(a_.node.m->send(kB, numbered(1), 9).ok());
  ASSERT_TRUE(a_.node.m->send(kB, numbered(2), 9).ok());
  ASSERT_TRUE(a_.node.send_next(kB).ok());
  ASSERT_TRUE(run([&] { return b_.node.ledger.delivered == 1; }));
  EXPECT_EQ(got, 1);
  EXPECT_EQ(b_.node.counter("msg.unknown_service"), 1u);
}

// attach() from a thread that is no loop's is posted to the loops; a message for that
// service that a loop reads first is not dropped: the loop takes the user from the
// messenger's record of attach() calls. Here the attach is made (from another thread)
// inside the dispatch of the message just before, so the posted attach cannot have run.
TEST_F(MessengerServicesTest, AnAttachFromAnotherThreadHoldsForTheNextMessageAlready) {
  start_both();
  Messenger* b = b_.node.m.get();
  int got = 0;
  ASSERT_TRUE(b->attach(8, [&](NodeId, std::span<const std::byte>) {
                 std::thread other([&] {
                   EXPECT_TRUE(
                       b->attach(9, [&](NodeId, std::span<const std::byte>) { ++got; }).ok());
                 });
                 other.join();
               }).ok());
  ASSERT_TRUE(a_.node.m->send(kB, numbered(1), 8).ok());
  ASSERT_TRUE(a_.node.m->send(kB, numbered(2), 9).ok());  // read with the one before
  ASSERT_TRUE(run([&] { return a_.node.m->session_info(kB)->queued == 0; }));
  EXPECT_EQ(got, 1);
  EXPECT_EQ(b_.node.counter("msg.unknown_service"), 0u);
  ASSERT_TRUE(a_.node.m->send(kB, numbered(3), 9).ok());  // the posted attach changed nothing
  ASSERT_TRUE(run([&] { return got == 2; }));
}

}  // namespace
}  // namespace rmsg::testing
