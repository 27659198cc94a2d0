// The session's and the connection's transition tables (session/session_state.h): every
// step the messenger makes is accepted, every other one refused, and Checked<S>::to()
// refuses by value in Release (the state unchanged) and stops a Debug build.
#include "session/session_state.h"

#include <gtest/gtest.h>

#include <iterator>
#include <set>
#include <string_view>
#include <utility>

namespace rmsg::session {
namespace {

using S = SessionState;
using C = ConnState;

constexpr S kSessionStates[] = {S::idle, S::backoff, S::queued, S::connecting, S::open, S::probing};
constexpr C kConnStates[] = {C::connecting, C::handshake, C::open, C::retired};

// Written out here, not derived from the table: each pair is a step the messenger takes.
const std::set<std::pair<S, S>> kSessionSteps = {
    // want_connection: no handshake slot, or an attempt at once.
    {S::idle, S::queued},
    {S::idle, S::connecting},
    // schedule_attempt: after a lost connection or a failed attempt.
    {S::idle, S::backoff},
    {S::connecting, S::backoff},
    // Nothing under way any more: the backoff timer, a freed slot, a lost connection,
    // no address to try (from every state, itself included).
    {S::idle, S::idle},
    {S::backoff, S::idle},
    {S::queued, S::idle},
    {S::connecting, S::idle},
    {S::open, S::idle},
    {S::probing, S::idle},
    // open_session: an accepted hello or a welcome opens it whatever it was doing.
    {S::idle, S::open},
    {S::backoff, S::open},
    {S::queued, S::open},
    {S::connecting, S::open},
    {S::open, S::open},
    {S::probing, S::open},
    // probe_due: an attempt over RDMA while the connection stays.
    {S::open, S::probing},
};

const std::set<std::pair<C, C>> kConnSteps = {
    {C::connecting, C::handshake},
    {C::handshake, C::open},
    {C::open, C::retired},
};

TEST(SessionState, EveryStepOfTheMessengerIsAccepted) {
  for (const auto& [from, to] : kSessionSteps) {
    EXPECT_TRUE(valid_transition(from, to)) << state_name(from) << " -> " << state_name(to);
    Checked<S> s(from);
    EXPECT_TRUE(s.to(to).ok()) << state_name(from) << " -> " << state_name(to);
    EXPECT_EQ(s.get(), to);
  }
}

TEST(SessionState, EveryOtherStepIsRefused) {
  int refused = 0;
  for (const S from : kSessionStates) {
    for (const S to : kSessionStates) {
      if (kSessionSteps.contains({from, to})) continue;
      EXPECT_FALSE(valid_transition(from, to)) << state_name(from) << " -> " << state_name(to);
      ++refused;
    }
  }
  EXPECT_EQ(refused, 36 - static_cast<int>(kSessionSteps.size()));
  // Probing is only ever entered from open: an attempt from idle is connecting.
  EXPECT_FALSE(valid_transition(S::idle, S::probing));
  EXPECT_FALSE(valid_transition(S::connecting, S::probing));
}

TEST(ConnState, EveryStepOfTheMessengerIsAcceptedAndNoOther) {
  for (const C from : kConnStates) {
    for (const C to : kConnStates) {
      EXPECT_EQ(valid_transition(from, to), kConnSteps.contains({from, to}))
          << state_name(from) << " -> " << state_name(to);
    }
  }
}

TEST(Checked, RefusedStepIsAnErrorAndLeavesTheState) {
#ifdef NDEBUG
  Checked<S> s(S::backoff);
  const Result<void> r = s.to(S::probing);
  EXPECT_TRUE(r.is(Errc::invalid_argument));
  EXPECT_EQ(s.get(), S::backoff);
  Checked<C> c(C::retired);
  EXPECT_FALSE(c.to(C::open).ok());
  EXPECT_EQ(c.get(), C::retired);
#else
  EXPECT_DEATH(
      {
        Checked<S> s(S::backoff);
        (void)s.to(S::probing);
      },
      "invariant failed");
#endif
}

TEST(Checked, NamesEveryState) {
  std::set<std::string_view> names;
  for (const S s : kSessionStates) names.insert(state_name(s));
  EXPECT_EQ(names.size(), std::size(kSessionStates));
  EXPECT_FALSE(names.contains("?"));
  names.clear();
  for (const C c : kConnStates) names.insert(state_name(c));
  EXPECT_EQ(names.size(), std::size(kConnStates));
  EXPECT_FALSE(names.contains("?"));
}

}  // namespace
}  // namespace rmsg::session
