#include "rmsg/counters.h"

#include <gtest/gtest.h>

#include <sstream>
#include <thread>
#include <vector>

namespace rmsg {
namespace {

TEST(Counters, CreateOnUseAndDumpSorted) {
  CounterSet set;
  set.counter("b.bytes").add(10);
  set.counter("a.msgs").add();
  set.counter("b.bytes").add(5);
  EXPECT_EQ(set.value("b.bytes"), 15u);
  EXPECT_EQ(set.value("missing"), 0u);
  std::ostringstream out;
  set.dump(out, "s1.");
  EXPECT_EQ(out.str(), "s1.a.msgs 1\ns1.b.bytes 15\n");
}

TEST(Counters, ReferencesStayValidAndAddsAreAtomic) {
  CounterSet set;
  Counter& first = set.counter("first");
  for (int i = 0; i < 1000; ++i) set.counter(std::to_string(i));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) first.add();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(set.value("first"), 40000u);
}

}  // namespace
}  // namespace rmsg
