#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "rmsg/event_loop.h"

namespace rmsg::testing {

class LoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = EventLoop::create();
    ASSERT_TRUE(r.ok()) << r.error().message();
    loop_ = std::move(r).value();
  }
  EventLoop& loop() { return *loop_; }
  std::unique_ptr<EventLoop> loop_;
};

}  // namespace rmsg::testing
