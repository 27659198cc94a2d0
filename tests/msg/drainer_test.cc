// The drain scaffolding both the messenger's and RPC's shards use (msg/drainer.h): it ends
// exactly once, after the loop's next turn once nothing is owed or at the deadline; never
// after abandon() or once its owner is gone.
#include "msg/drainer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "kit/seed.h"
#include "rmsg/event_loop.h"

namespace rmsg::msg {
namespace {

using std::chrono::milliseconds;

class DrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto l = EventLoop::create({.clock = clock_, .seed = testing::seed_for("loop")});
    ASSERT_TRUE(l.ok());
    loop_ = std::move(l).value();
    drainer_ = std::make_unique<Drainer>(*loop_);
  }
  void start(Clock::time_point deadline) {
    drainer_->start(
        owner_, deadline, [this] { return owed_ == 0; }, [this] { ++ends_; });
  }
  void turn(milliseconds d = milliseconds(1)) {
    loop_->run_for([] { return false; }, d);
  }

  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  std::unique_ptr<EventLoop> loop_;
  std::shared_ptr<int> owner_ = std::make_shared<int>(0);
  std::unique_ptr<Drainer> drainer_;
  int owed_ = 2;
  int ends_ = 0;
};

TEST_F(DrainerTest, EndsOnceAfterTheLastOwedGoesOnTheNextTurn) {
  start(loop_->now() + std::chrono::seconds(10));
  EXPECT_TRUE(drainer_->draining());
  owed_ = 1;
  drainer_->check();
  turn();
  EXPECT_EQ(ends_, 0);
  owed_ = 0;
  drainer_->check();
  EXPECT_EQ(ends_, 0) << "never inside the handler that emptied the last queue";
  drainer_->check();  // asked again before the turn: still one end
  turn();
  EXPECT_EQ(ends_, 1);
  EXPECT_FALSE(drainer_->draining());
  turn(milliseconds(20'000));  // the deadline passes: nothing more
  EXPECT_EQ(ends_, 1);
}

TEST_F(DrainerTest, EndsAtTheDeadlineWithSomethingStillOwed) {
  start(loop_->now() + milliseconds(50));
  turn(milliseconds(49));
  EXPECT_EQ(ends_, 0);
  turn(milliseconds(2));
  EXPECT_EQ(ends_, 1);
  owed_ = 0;
  drainer_->check();
  turn();
  EXPECT_EQ(ends_, 1);
}

TEST_F(DrainerTest, NothingOwedAtTheStartEndsOnTheNextTurn) {
  owed_ = 0;
  start(loop_->now() + std::chrono::seconds(10));
  EXPECT_EQ(ends_, 0);
  turn();
  EXPECT_EQ(ends_, 1);
}

TEST_F(DrainerTest, AbandonedOrOwnerGoneNeverEnds) {
  start(loop_->now() + milliseconds(50));
  drainer_->abandon();
  EXPECT_FALSE(drainer_->draining());
  turn(milliseconds(100));
  EXPECT_EQ(ends_, 0);

  owed_ = 0;
  start(loop_->now() + milliseconds(50));  // a check is queued for the next turn
  owner_.reset();
  turn(milliseconds(100));
  EXPECT_EQ(ends_, 0);
}

}  // namespace
}  // namespace rmsg::msg
