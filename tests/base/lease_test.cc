// Lease (base/lease.h): one unit of a count per lease, given back exactly once, by whoever
// holds it last, also after its count is gone.
#include "base/lease.h"

#include <gtest/gtest.h>

#include <optional>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace rmsg {
namespace {

static_assert(!std::is_copy_constructible_v<Lease> && !std::is_copy_assignable_v<Lease>);
static_assert(std::is_nothrow_move_constructible_v<Lease>);

TEST(Lease, CountsFromTakeUntilReleasedAndMovesWithoutCountingTwice) {
  LeaseCount count;
  Lease a = count.take();
  std::optional<Lease> b(count.take());
  EXPECT_EQ(count.live(), 2u);
  Lease moved = std::move(a);
  a.reset();  // moved from: holds nothing
  EXPECT_EQ(count.live(), 2u);
  moved = std::move(*b);  // the unit `moved` held is given back
  EXPECT_EQ(count.live(), 1u);
  b.reset();
  EXPECT_EQ(count.live(), 1u);
  moved.reset();
  moved.reset();
  EXPECT_EQ(count.live(), 0u);
  Lease empty;
  empty.reset();
  EXPECT_EQ(count.live(), 0u);
}

TEST(Lease, OutlivesItsCount) {
  Lease kept;
  {
    LeaseCount count;
    kept = count.take();
    EXPECT_EQ(count.live(), 1u);
  }
  kept.reset();  // nothing to give back to: no crash, no write to freed memory (ASan)
}

TEST(Lease, ReleasedOnOtherThreads) {
  LeaseCount count;
  std::vector<Lease> leases;
  for (int i = 0; i < 64; ++i) leases.push_back(count.take());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    std::vector<Lease> mine;
    for (int i = 0; i < 16; ++i) {
      mine.push_back(std::move(leases.back()));
      leases.pop_back();
    }
    threads.emplace_back([m = std::move(mine)]() mutable { m.clear(); });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(count.live(), 0u);
}

TEST(Lease, TheNotifierRunsOncePerUnitReturnedAfterTheCountFell) {
  std::vector<std::size_t> seen;
  LeaseCount* self = nullptr;
  LeaseCount count([&] { seen.push_back(self->live()); });
  self = &count;
  Lease a = count.take();
  Lease b = count.take();
  Lease moved = std::move(a);  // a move returns nothing
  a.reset();                   // nor does an empty lease
  EXPECT_TRUE(seen.empty());
  moved.reset();
  b = Lease{};
  EXPECT_EQ(seen, (std::vector<std::size_t>{1, 0}));
}

}  // namespace
}  // namespace rmsg
