// The Stream-contract cases of rmsg/stream.h's readiness rule: a callback is called when
// its condition becomes true, again only after a call that made progress, rests after a
// call that made none until read()/write() or the setter, and would_block never loses a
// wakeup.
#include <array>
#include <chrono>
#include <cstring>
#include <span>
#include <vector>

#include "kit/pattern.h"
#include "kit/seed.h"
#include "kit/stream_contract.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;
constexpr Duration kDeadline = 60s;

std::span<const std::byte> bytes_of(const char* s) {
  return {reinterpret_cast<const std::byte*>(s), std::strlen(s)};
}

// Writes the pattern from `offset` until write() would block; the bytes written.
std::size_t fill_until_blocked(Stream& s, const Pattern& pattern, std::uint64_t& offset) {
  std::size_t total = 0;
  while (total <= (256u << 20)) {
    auto r = s.write(pattern.at(offset, 64 << 10));
    if (!r) {
      EXPECT_TRUE(r.is(Errc::would_block)) << r.error().message();
      return total;
    }
    offset += *r;
    total += *r;
  }
  ADD_FAILURE() << "256 MiB written and no would_block: the peer does not hold back";
  return total;
}

// Runs the loop for `span` of its time, whatever happens (an idle loop sleeps in the
// kernel until the deadline's timer).
void run_idle(EventLoop& loop, Duration span) {
  loop.run_for([] { return false; }, span);
}

}  // namespace

// "It is not called again while nothing changed": one idle second with both callbacks set
// on both ends costs at most one call per callback (on_writable's, as it becomes
// writable), not one per loop iteration. The callbacks use the stream the way a reader
// and an idle writer do: read until would_block, write nothing.
TEST_P(StreamContract, IdleStreamCallsEachCallbackAtMostOnceASecond) {
  auto pair = connect_pair();  // named, not bound: lambdas capture them (clang 14)
  Stream& a = pair.first;
  Stream& b = pair.second;
  ASSERT_TRUE(a && b);
  int calls[2][2] = {};  // [end][readable, writable]
  Stream* ends[2] = {&a, &b};
  for (int e = 0; e < 2; ++e) {
    Stream& s = *ends[e];
    s.on_readable([&s, &calls, e] {
      ++calls[e][0];
      std::array<std::byte, 256> buf;
      while (s.read(buf).ok()) {
      }
    });
    s.on_writable([&calls, e] { ++calls[e][1]; });
  }
  const auto iterations = loop().counters().value("loop.iterations");
  run_idle(loop(), 1s);
  for (int e = 0; e < 2; ++e) {
    EXPECT_EQ(calls[e][0], 0) << "end " << e << ": on_readable on an idle stream";
    EXPECT_LE(calls[e][1], 1) << "end " << e << ": on_writable calls in one idle second";
    EXPECT_GE(calls[e][1], 1) << "end " << e << ": on_writable never called though writable";
  }
  EXPECT_LE(loop().counters().value("loop.iterations") - iterations, 20u)
      << "the loop kept iterating over an idle second";
  a.on_readable({});
  a.on_writable({});
  b.on_readable({});
  b.on_writable({});
}

// A callback that does not read made no progress: it is not called again while its data
// waits, until the application reads (outside any callback here) or sets it again.
TEST_P(StreamContract, IgnoredReadinessRestsUntilReadOrSetAgain) {
  auto pair = connect_pair();  // named, not bound: lambdas capture them (clang 14)
  Stream& a = pair.first;
  Stream& b = pair.second;
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a.write(bytes_of("0123456789")).ok());
  int fired = 0;
  bool read_in_callback = false;
  std::vector<std::byte> got;
  b.on_readable([&] {
    ++fired;
    if (!read_in_callback) return;  // declines: no progress
    std::array<std::byte, 64> buf;
    for (;;) {
      auto r = b.read(buf);
      if (!r || *r == 0) return;
      got.insert(got.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(*r));
    }
  });
  ASSERT_TRUE(loop().run_for([&] { return fired > 0; }, kDeadline)) << "never called";
  run_idle(loop(), 200ms);
  EXPECT_EQ(fired, 1) << "called again though the first call made no progress";

  // Setting it again while data waits calls it once, deferred.
  b.on_readable([&] { ++fired; });
  EXPECT_EQ(fired, 1) << "called inside the setter";
  ASSERT_TRUE(loop().run_for([&] { return fired > 1; }, kDeadline)) << "not called after set";
  run_idle(loop(), 200ms);
  EXPECT_EQ(fired, 2);

  // A read() outside the callbacks re-arms: more data then calls it.
  std::array<std::byte, 4> four;
  auto r = b.read(four);
  ASSERT_TRUE(r.ok()) << r.error().message();
  got.insert(got.end(), four.begin(), four.begin() + static_cast<std::ptrdiff_t>(*r));
  read_in_callback = true;
  b.on_readable([&] {
    ++fired;
    std::array<std::byte, 64> buf;
    for (;;) {
      auto n = b.read(buf);
      if (!n || *n == 0) return;
      got.insert(got.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(*n));
    }
  });
  ASSERT_TRUE(loop().run_for([&] { return got.size() >= 10; }, kDeadline));
  EXPECT_TRUE(std::equal(got.begin(), got.end(), bytes_of("0123456789").begin()));
  const int before = fired;
  ASSERT_TRUE(a.write(bytes_of("more")).ok());
  ASSERT_TRUE(loop().run_for([&] { return got.size() >= 14; }, kDeadline))
      << "new data after a draining read did not call on_readable";
  EXPECT_GT(fired, before);
  b.on_readable({});
}

// "A read()/write() that returns would_block, wherever it is called, arms its callback":
// on_writable has been called and rested; the application then writes outside callbacks
// until would_block; the peer reads outside its callbacks (a timer); on_writable must come.
TEST_P(StreamContract, WouldBlockWriterGetsOnWritableOnceThePeerReads) {
  auto pair = connect_pair();  // named, not bound: lambdas capture them (clang 14)
  Stream& a = pair.first;
  Stream& b = pair.second;
  ASSERT_TRUE(a && b);
  int fired = 0;
  a.on_writable([&] { ++fired; });  // writes nothing: rests after this call
  ASSERT_TRUE(loop().run_for([&] { return fired > 0; }, kDeadline));
  run_idle(loop(), 100ms);
  ASSERT_EQ(fired, 1) << "on_writable did not rest after a call without progress";

  const Pattern pattern(seed_for("pattern"));
  std::uint64_t sent = 0;
  ASSERT_GT(fill_until_blocked(a, pattern, sent), 0u);
  std::uint64_t received = 0;
  bool mismatch = false;
  std::error_code read_error;
  const TimerId reader = loop().add_periodic(1ms, [&] {
    std::vector<std::byte> buf(64 << 10);
    for (;;) {
      auto r = b.read(buf);
      if (!r) {
        if (!r.is(Errc::would_block)) read_error = r.error();
        return;
      }
      if (*r == 0) return;
      if (!pattern.matches(received, std::span(buf).first(*r))) mismatch = true;
      received += *r;
    }
  });
  const bool woke = loop().run_for([&] { return fired > 1 || read_error; }, kDeadline);
  loop().cancel_timer(reader);
  EXPECT_TRUE(woke) << "a writer that saw would_block never got on_writable; the peer read "
                    << received << " of " << sent << " bytes";
  EXPECT_FALSE(read_error) << read_error.message();
  EXPECT_FALSE(mismatch);
  auto w = a.write(pattern.at(sent, 1024));
  EXPECT_TRUE(w.ok()) << "on_writable came but write() refuses: " << w.error().message();
  a.on_writable({});
}

}  // namespace rmsg::testing
