// SetupBudget: see setup_budget.h.
#include "rdma/setup_budget.h"

namespace rmsg::rdma {
namespace {

const char kServiceKey = 0;

}  // namespace

SetupBudget::SetupBudget(EventLoop& loop)
    : loop_(loop),
      calls_(set_.counter("setup.calls")),
      deferred_(set_.counter("setup.deferred")),
      max_per_iteration_(set_.counter("setup.max_calls_per_iteration")) {}

std::shared_ptr<SetupBudget> SetupBudget::of(EventLoop& loop) {
  auto found = std::static_pointer_cast<SetupBudget>(loop.service(&kServiceKey));
  if (found) return found;
  auto made = std::make_shared<SetupBudget>(loop);
  loop.set_service(&kServiceKey, made);
  return made;
}

bool SetupBudget::try_take(std::uint32_t calls, std::uint32_t max) {
  // The loop counts its iterations anyway: a new count is a new iteration's budget.
  const std::uint64_t now = loop_.counters().value("loop.iterations");
  if (now != iteration_) {
    iteration_ = now;
    used_ = 0;
  }
  if (max != 0 && used_ != 0 && used_ + calls > max) {
    deferred_.add_owned();
    return false;
  }
  used_ += calls;
  calls_.add_owned(calls);
  if (used_ > max_per_iteration_.value()) max_per_iteration_.set(used_);
  return true;
}

}  // namespace rmsg::rdma
