// The acceptor's decision order (reconnect_decision.h), rule by rule, and the races it
// exists for: each side's decision on the other's attempt must leave exactly one winner.
#include "session/reconnect_decision.h"

#include <gtest/gtest.h>

namespace rmsg::session {
namespace {

using K = Decision::Kind;

constexpr NodeId kMe = 10;
constexpr NodeId kPeer = 20;

SessionView established(std::uint64_t cs = 3) {
  return {.exists = true,
          .my_cookie = 111,
          .peer_cookie = 222,
          .peer_global_seq = 5,
          .connect_seq = cs};
}
Hello reconnect(std::uint64_t gs, std::uint64_t cs) {
  return {.node = kPeer,
          .target = kMe,
          .client_cookie = 222,
          .server_cookie = 111,
          .global_seq = gs,
          .connect_seq = cs};
}

TEST(Decide, NoSession) {
  EXPECT_EQ(decide({}, Hello{.node = kPeer, .client_cookie = 9}, kMe).kind, K::accept);
  // A reconnect to a session we do not have (we restarted): reset.
  EXPECT_EQ(decide({}, reconnect(6, 4), kMe).kind, K::reset);
}

TEST(Decide, CookieRules) {
  Hello h = reconnect(6, 4);
  h.server_cookie = 999;  // not ours
  EXPECT_EQ(decide(established(), h, kMe).kind, K::reset);

  Hello fresh{.node = kPeer, .client_cookie = 333, .global_seq = 1, .connect_seq = 1};
  Decision d = decide(established(), fresh, kMe);  // the peer restarted
  EXPECT_EQ(d.kind, K::accept);
  EXPECT_TRUE(d.reset_local);

  Hello stale = reconnect(6, 4);
  stale.client_cookie = 333;  // knows our cookie, but another own cookie
  EXPECT_EQ(decide(established(), stale, kMe).kind, K::reset);

  // Our session exists but never learned the peer's cookie (our welcome was lost on the
  // way to us): the peer's reconnect teaches it.
  SessionView s = established();
  s.peer_cookie = 0;
  EXPECT_EQ(decide(s, reconnect(6, 4), kMe).kind, K::accept);
}

TEST(Decide, AnAbandonedIdentWithARetiredCookieLeavesTheSessionAlone) {
  // The peer replaced cookie 333 by 222 (a restart we accepted); a client_ident of 333
  // read late comes from an attempt abandoned before that: ours is the newer session.
  Hello late{.node = kPeer, .client_cookie = 333, .global_seq = 1, .connect_seq = 1};
  SessionView s = established();
  s.client_cookie_retired = true;
  const Decision d = decide(s, late, kMe);
  EXPECT_EQ(d.kind, K::reset);
  EXPECT_FALSE(d.reset_local);
  EXPECT_FALSE(d.drop_outbound);
  // The same ident with a cookie never seen is a restart.
  s.client_cookie_retired = false;
  EXPECT_TRUE(decide(s, late, kMe).reset_local);
}

TEST(Decide, LostServerIdentIsAResumeNotAReset) {
  // The peer never got our server_ident: same client cookie, no server cookie.
  Hello h{.node = kPeer, .client_cookie = 222, .global_seq = 6, .connect_seq = 4};
  Decision d = decide(established(), h, kMe);
  EXPECT_EQ(d.kind, K::accept);
  EXPECT_FALSE(d.reset_local);
}

TEST(Decide, GlobalSeqRule) {
  Decision d = decide(established(), reconnect(5, 4), kMe);
  EXPECT_EQ(d.kind, K::retry_global);
  EXPECT_EQ(d.value, 5u);
  EXPECT_EQ(decide(established(), reconnect(6, 4), kMe).kind, K::accept);
}

TEST(Decide, ConnectSeqRule) {
  Decision d = decide(established(3), reconnect(6, 3), kMe);
  EXPECT_EQ(d.kind, K::retry);
  EXPECT_EQ(d.value, 3u);
  EXPECT_EQ(decide(established(3), reconnect(7, 4), kMe).kind, K::accept);
}

TEST(Decide, RaceRules) {
  SessionView s = established(3);
  s.outbound = true;
  s.outbound_connect_seq = 4;
  Decision higher = decide(s, reconnect(6, 5), kMe);
  EXPECT_EQ(higher.kind, K::accept);
  EXPECT_TRUE(higher.drop_outbound);
  Decision lower = decide(s, reconnect(6, 3), kMe);
  EXPECT_EQ(lower.kind, K::retry);
  EXPECT_EQ(lower.value, 4u);
  // Equal: the lower node id's attempt wins.
  Decision equal = decide(s, reconnect(6, 4), kMe);  // kMe < kPeer: ours wins
  EXPECT_EQ(equal.kind, K::wait);
  Hello from_low = reconnect(6, 4);
  from_low.node = 5;  // a peer with a lower id than ours
  Decision theirs = decide(s, from_low, kMe);
  EXPECT_EQ(theirs.kind, K::accept);
  EXPECT_TRUE(theirs.drop_outbound);
}

// Both sides' views of one race, decided on each side: exactly one attempt is accepted.
TEST(Decide, SimultaneousReconnectHasExactlyOneWinner) {
  for (std::uint64_t cs_a = 3; cs_a <= 5; ++cs_a) {
    for (std::uint64_t cs_b = 3; cs_b <= 5; ++cs_b) {
      const NodeId a = 1, b = 2;
      SessionView at_a{.exists = true,
                       .my_cookie = 11,
                       .peer_cookie = 22,
                       .peer_global_seq = 1,
                       .connect_seq = 2,
                       .outbound = true,
                       .outbound_connect_seq = cs_a};
      SessionView at_b{.exists = true,
                       .my_cookie = 22,
                       .peer_cookie = 11,
                       .peer_global_seq = 1,
                       .connect_seq = 2,
                       .outbound = true,
                       .outbound_connect_seq = cs_b};
      Hello from_a{.node = a,
                   .client_cookie = 11,
                   .server_cookie = 22,
                   .global_seq = 2,
                   .connect_seq = cs_a};
      Hello from_b{.node = b,
                   .client_cookie = 22,
                   .server_cookie = 11,
                   .global_seq = 2,
                   .connect_seq = cs_b};
      const Decision on_b = decide(at_b, from_a, b);  // B decides on A's attempt
      const Decision on_a = decide(at_a, from_b, a);
      const int accepted = (on_b.kind == K::accept) + (on_a.kind == K::accept);
      const int rejected_or_wait = (on_b.kind != K::accept) + (on_a.kind != K::accept);
      if (cs_a == cs_b) {
        EXPECT_EQ(accepted, 1) << cs_a << " " << cs_b;
        EXPECT_EQ(on_b.kind, K::accept) << "the lower id's attempt wins";
        EXPECT_EQ(on_a.kind, K::wait);
      } else {
        // The higher connect_seq wins; the other is told to retry with it, and that retry
        // (on the winner's side, now without an outbound) is not accepted twice.
        EXPECT_EQ(accepted, 1) << cs_a << " " << cs_b;
        EXPECT_EQ(rejected_or_wait, 1);
      }
    }
  }
}

}  // namespace
}  // namespace rmsg::session
