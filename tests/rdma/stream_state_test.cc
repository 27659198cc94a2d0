// The stream's ConnState transitions (stream_state.h): the ones RdmaStream::enter accepts.
#include "rdma/stream_state.h"

#include <gtest/gtest.h>

namespace rmsg::rdma {
namespace {

TEST(ConnState, OnlyTheDiagramsTransitionsAreValid) {
  using S = ConnState;
  EXPECT_TRUE(valid_transition(S::connecting, S::established));
  EXPECT_TRUE(valid_transition(S::connecting, S::setup_failed));
  EXPECT_TRUE(valid_transition(S::established, S::failed));
  for (const S from : {S::connecting, S::established, S::setup_failed, S::failed, S::lingering}) {
    EXPECT_TRUE(valid_transition(from, S::closed)) << state_name(from);
    EXPECT_FALSE(valid_transition(from, S::connecting)) << state_name(from);
  }
  EXPECT_FALSE(valid_transition(S::closed, S::closed));
  EXPECT_FALSE(valid_transition(S::closed, S::established));
  EXPECT_FALSE(valid_transition(S::established, S::established));
  EXPECT_FALSE(valid_transition(S::failed, S::established));
  EXPECT_FALSE(valid_transition(S::connecting, S::failed));  // before setup: setup_failed
  EXPECT_FALSE(valid_transition(S::setup_failed, S::failed));
}

// Lingering (a graceful close) follows only an established stream and ends only closed:
// an error while it lingers aborts it, it does not go back to failed.
TEST(ConnState, LingeringComesFromEstablishedAndGoesToClosed) {
  using S = ConnState;
  EXPECT_TRUE(valid_transition(S::established, S::lingering));
  EXPECT_TRUE(valid_transition(S::lingering, S::closed));
  for (const S from : {S::connecting, S::setup_failed, S::failed, S::lingering, S::closed}) {
    EXPECT_FALSE(valid_transition(from, S::lingering)) << state_name(from);
  }
  for (const S to : {S::established, S::failed, S::setup_failed}) {
    EXPECT_FALSE(valid_transition(S::lingering, to)) << state_name(to);
  }
  EXPECT_STREQ(state_name(S::lingering), "lingering");
}

}  // namespace
}  // namespace rmsg::rdma
