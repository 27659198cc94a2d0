// The connector's reactions (connector.h), and whole handshakes played between the two
// pure halves (decide() on the acceptor, react() on the connector) with no I/O at all.
#include "session/connector.h"

#include <gtest/gtest.h>

#include "rmsg/messenger.h"
#include "session/reconnect_decision.h"

namespace rmsg::session {
namespace {

using K = Reaction::Kind;

AttemptNumbers numbers() {
  return {.target = 20, .peer_cookie = 222, .connect_seq = 3, .global_seq = 9, .attempt_cs = 4};
}

TEST(Connector, WelcomeEstablishesWithTheNumbersAsked) {
  AttemptNumbers n = numbers();
  const auto w = encode(Welcome{20, 222, 4, 17, 0});
  Reaction r = react(FrameType::session_reconnect_ok, w, n);
  EXPECT_EQ(r.kind, K::established);
  EXPECT_EQ(r.welcome.msg_seq, 17u);
  EXPECT_EQ(n.connect_seq, 4u);
}

TEST(Connector, WelcomeChecks) {
  AttemptNumbers n = numbers();
  EXPECT_EQ(react(FrameType::session_reconnect_ok, encode(Welcome{21, 222, 4, 0, 0}), n).error,
            make_error_code(MessengerErrc::wrong_node));
  EXPECT_EQ(react(FrameType::session_reconnect_ok, encode(Welcome{20, 999, 4, 0, 0}), n).error,
            make_error_code(MessengerErrc::bad_payload));  // not the cookie we named
  EXPECT_EQ(react(FrameType::session_reconnect_ok, encode(Welcome{20, 222, 5, 0, 0}), n).error,
            make_error_code(MessengerErrc::bad_payload));  // not the number we asked
  EXPECT_EQ(react(FrameType::server_ident, encode(Welcome{20, 222, 4, 0, 0}), n).error,
            make_error_code(MessengerErrc::bad_payload));  // we sent a reconnect
  EXPECT_EQ(react(FrameType::session_reconnect_ok, std::span<const std::byte>{}, n).error,
            make_error_code(MessengerErrc::bad_payload));
  EXPECT_EQ(n.connect_seq, 3u);  // unchanged by failures
  AttemptNumbers fresh{.target = 20, .attempt_cs = 1};
  Reaction r = react(FrameType::server_ident, encode(Welcome{20, 555, 1, 0, 0}), fresh);
  EXPECT_EQ(r.kind, K::established);
  EXPECT_EQ(fresh.peer_cookie, 555u);  // learned
}

TEST(Connector, RetriesRaiseTheNumbers) {
  AttemptNumbers n = numbers();
  EXPECT_EQ(react(FrameType::session_retry, encode(Value64{7}), n).kind, K::send_hello);
  EXPECT_EQ(n.connect_seq, 7u);
  EXPECT_EQ(react(FrameType::session_retry, encode(Value64{2}), n).kind, K::send_hello);
  EXPECT_EQ(n.connect_seq, 7u);  // never lowered
  EXPECT_EQ(react(FrameType::session_retry_global, encode(Value64{50}), n).kind, K::send_hello);
  EXPECT_EQ(n.global_seq, 50u);
}

TEST(Connector, WaitBumpsConnectSeqToTheAttempt) {
  AttemptNumbers n = numbers();
  EXPECT_EQ(react(FrameType::wait, encode(Value64{4}), n).kind, K::give_way);
  EXPECT_EQ(n.connect_seq, 4u);  // the next attempt asks for 5: beats an equal 4
}

TEST(Connector, ResetCloseAndOthers) {
  AttemptNumbers n = numbers();
  EXPECT_EQ(react(FrameType::session_reset, encode(Reason{CloseReason::unknown_session}), n).kind,
            K::reset_session);
  EXPECT_EQ(react(FrameType::close, encode(Reason{CloseReason::wrong_node}), n).error,
            make_error_code(MessengerErrc::wrong_node));
  EXPECT_EQ(react(FrameType::close, encode(Reason{CloseReason::shutdown}), n).error,
            make_error_code(MessengerErrc::peer_closed));
  EXPECT_EQ(react(FrameType::message, {}, n).error,
            make_error_code(MessengerErrc::unexpected_frame));
}

// One side's session numbers, as both halves see them.
struct Side {
  NodeId node;
  Cookie cookie;
  Cookie peer_cookie = 0;
  std::uint64_t peer_gs = 0;
  std::uint64_t cs = 0;
  std::uint64_t gs = 0;
};

// Plays connector `c` against acceptor `a` (no attempt of its own under way) until the
// connector is established or gives way; returns the number of hellos sent.
int handshake(Side& c, Side& a, bool& established) {
  AttemptNumbers n{a.node, c.peer_cookie, c.cs, c.gs, 0};
  for (int hellos = 1; hellos <= 10; ++hellos) {
    const Hello h{c.node, a.node, c.cookie, n.peer_cookie, ++n.global_seq, n.connect_seq + 1, 0, 0};
    n.attempt_cs = h.connect_seq;
    const SessionView v{.exists = true,
                        .my_cookie = a.cookie,
                        .peer_cookie = a.peer_cookie,
                        .peer_global_seq = a.peer_gs,
                        .connect_seq = a.cs};
    const Decision d = decide(v, h, a.node);
    Reaction r;
    switch (d.kind) {
      case Decision::Kind::accept:
        a.peer_cookie = h.client_cookie;
        a.peer_gs = h.global_seq;
        a.cs = h.connect_seq;
        r = react(h.server_cookie == 0 ? FrameType::server_ident : FrameType::session_reconnect_ok,
                  encode(Welcome{a.node, a.cookie, a.cs, 0, 0}), n);
        break;
      case Decision::Kind::retry:
        a.peer_gs = h.global_seq;
        r = react(FrameType::session_retry, encode(Value64{d.value}), n);
        break;
      case Decision::Kind::retry_global:
        r = react(FrameType::session_retry_global, encode(Value64{d.value}), n);
        break;
      default:
        ADD_FAILURE() << "unexpected decision " << d.why;
        return hellos;
    }
    c.peer_cookie = n.peer_cookie;
    c.cs = n.connect_seq;
    c.gs = n.global_seq;
    if (r.kind == K::established) {
      established = true;
      return hellos;
    }
    EXPECT_EQ(r.kind, K::send_hello);
  }
  return 10;
}

TEST(Handshake, FirstConnectThenReconnectsAgree) {
  Side a{1, 111};
  Side b{2, 222};
  bool ok = false;
  EXPECT_EQ(handshake(a, b, ok), 1);
  ASSERT_TRUE(ok);
  EXPECT_EQ(a.cs, b.cs);
  EXPECT_EQ(a.peer_cookie, 222u);
  for (int i = 0; i < 3; ++i) {
    ok = false;
    EXPECT_EQ(handshake(i % 2 ? b : a, i % 2 ? a : b, ok), 1);
    EXPECT_TRUE(ok);
    EXPECT_EQ(a.cs, b.cs);
  }
}

TEST(Handshake, LostWelcomeCostsOneRetry) {
  Side a{1, 111};
  Side b{2, 222};
  bool ok = false;
  handshake(a, b, ok);
  // B accepts A's next reconnect, but the welcome is lost: B is one connection ahead.
  b.cs += 1;
  b.peer_gs = a.gs + 1;
  a.gs += 1;
  ok = false;
  EXPECT_EQ(handshake(a, b, ok), 2);  // retry, then accepted
  EXPECT_TRUE(ok);
  EXPECT_EQ(a.cs, b.cs);
}

TEST(Handshake, StaleGlobalSeqCostsOneRetryGlobal) {
  Side a{1, 111};
  Side b{2, 222};
  bool ok = false;
  handshake(a, b, ok);
  b.peer_gs = a.gs + 100;  // B saw a newer attempt of A's (A lost its count? a stale view)
  ok = false;
  EXPECT_EQ(handshake(a, b, ok), 2);
  EXPECT_TRUE(ok);
}

}  // namespace
}  // namespace rmsg::session
