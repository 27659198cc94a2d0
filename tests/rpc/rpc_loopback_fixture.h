// The fixture of the RPC loopback tests (rpc_loopback_test.cc, rpc_cancel_bounds_test.cc):
// two endpoints on one loop over loopback streams and a manual clock; A calls, B serves
// an echo (kEcho) and a method that keeps its responders (kHold).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rpc/rpc_fixture.h"

namespace rmsg::testing {

class RpcLoopbackTest : public ::testing::Test {
 protected:
  static constexpr NodeId kA = 1;
  static constexpr NodeId kB = 2;
  static constexpr std::uint16_t kPortA = 7101;
  static constexpr std::uint16_t kPortB = 7102;
  static constexpr std::uint32_t kEcho = 1;
  static constexpr std::uint32_t kHold = 2;  // B keeps the responder in held_

  void SetUp() override {
    auto l = EventLoop::create({.clock = clock_, .seed = seed_for("loop")});
    ASSERT_TRUE(l.ok());
    loop_ = std::move(l).value();
  }
  void TearDown() override {
    held_.clear();
    a_.ep.reset();
    b_.ep.reset();
    loop_->run_for([] { return false; }, std::chrono::milliseconds(1));
  }

  void start(RpcSide& side, std::uint16_t port, RpcOptions o) {
    side.ep.reset();
    RpcSide* s = &side;
    auto ep = RpcAccess::create(
        *loop_, o,
        std::make_unique<LoopbackStreams>(*loop_, side.connect_faults, side.accept_faults),
        [s](SessionEvent e) { s->events.push_back(std::move(e)); });
    ASSERT_TRUE(ep.ok());
    side.ep = std::move(ep).value();
    ASSERT_TRUE(
        side.ep->messenger().listen(loopback_params(port).peer, loopback_params(port)).ok());
  }
  void start_b(RpcOptions o) {
    start(b_, kPortB, o);
    b_.ep->handle(kEcho, [this](const RpcRequest& r, RpcResponder reply) {
      ++runs_;
      reply.ok(r.body);
    });
    b_.ep->handle(kHold, [this](const RpcRequest& r, RpcResponder reply) {
      ++runs_;
      held_ids_.push_back(r.id);
      held_.push_back(std::move(reply));
    });
  }
  void start_both() {
    start(a_, kPortA, rpc_options(kA));
    start_b(rpc_options(kB));
    ASSERT_TRUE(a_.ep->messenger().add_peer(kB, loopback_params(kPortB)).ok());
  }
  Result<CallId> call(std::uint32_t method, const std::string& body,
                      Duration timeout = std::chrono::seconds(5), CallId retry_of = 0) {
    auto slot = std::make_shared<CallId>(0);
    auto r = a_.ep->call(kB, method, bytes_of(body),
                         {.deadline = loop_->now() + timeout, .retry_of = retry_of},
                         [this, slot](RpcResponse resp) { done_[*slot] = std::move(resp); });
    if (r) *slot = r.value();
    return r;
  }
  bool run(const std::function<bool()>& done) {
    return loop_->run_for(done, std::chrono::seconds(60));
  }
  bool completed(CallId id) const { return done_.contains(id); }

  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  std::unique_ptr<EventLoop> loop_;
  RpcSide a_;
  RpcSide b_;
  int runs_ = 0;
  std::vector<RpcResponder> held_;
  std::vector<CallId> held_ids_;
  std::map<CallId, RpcResponse> done_;
};

}  // namespace rmsg::testing
