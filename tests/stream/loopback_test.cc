// The loopback transport's own behaviour (kit/loopback.h): naming, buffers, and each fault.
// The Stream contract itself is checked by contract_loopback_test.cc.
#include <gtest/gtest.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "kit/loop_fixture.h"
#include "kit/loopback.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;

std::span<const std::byte> bytes_of(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

class Loopback : public LoopTest {
 protected:
  // Everything readable now (after letting the loop deliver), or the error that ended it.
  Result<std::string> drain(Stream& s) {
    for (int i = 0; i < 3; ++i) (void)loop().run_once(Duration::zero());
    std::string out;
    std::array<char, 4096> buf;
    for (;;) {
      auto r = s.read(buf.data(), buf.size());
      if (!r) {
        if (r.is(Errc::would_block) || !out.empty()) return out;
        return r.error();
      }
      if (*r == 0) return out;
      out.append(buf.data(), *r);
    }
  }
  // Connects to name:port and runs the loop until the callback came.
  Result<Stream> connect(const std::string& name, std::uint16_t port,
                         const LoopbackOptions& o = {}) {
    std::optional<Result<Stream>> got;
    loopback_connect(loop(), name, port, o, [&](Result<Stream> r) { got.emplace(std::move(r)); });
    EXPECT_FALSE(got.has_value()) << "the callback ran inside loopback_connect";
    EXPECT_TRUE(loop().run_for([&] { return got.has_value(); }, 5s));
    if (!got) return Errc::timeout;
    return std::move(*got);
  }
};

TEST_F(Loopback, ListenerAcceptsConnectsByNameAndPort) {
  std::vector<Stream> accepted;
  auto l = loopback_listen(loop(), "node-a", 7000, {},
                           [&](Stream s) { accepted.push_back(std::move(s)); });
  ASSERT_TRUE(l.ok()) << l.error().message();
  EXPECT_EQ(l->port(), 7000);
  EXPECT_EQ(l->local_address(), "node-a:7000");

  LoopbackOptions o;
  o.local_name = "node-b";
  auto c = connect("node-a", 7000, o);
  ASSERT_TRUE(c.ok()) << c.error().message();
  ASSERT_EQ(accepted.size(), 1u) << "the listener did not get the server side";
  EXPECT_STREQ(c->transport(), "loopback");
  EXPECT_EQ(c->peer_address(), "node-a:7000");
  EXPECT_EQ(accepted[0].local_address(), "node-a:7000");
  EXPECT_EQ(accepted[0].peer_address(), c->local_address());
  EXPECT_EQ(c->local_address().rfind("node-b:", 0), 0u) << c->local_address();

  ASSERT_TRUE(c->write(bytes_of("hello")).ok());
  auto got = drain(accepted[0]);
  ASSERT_TRUE(got.ok()) << got.error().message();
  EXPECT_EQ(*got, "hello");
}

TEST_F(Loopback, ConnectWithoutListenerIsRefused) {
  auto c = connect("nobody", 1);
  EXPECT_EQ(c.error(), make_error_code(Errc::connection_refused));
  auto l = loopback_listen(loop(), "x", 5, {}, [](Stream) {});
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(connect("x", 6).error(), make_error_code(Errc::connection_refused)) << "wrong port";
  EXPECT_EQ(connect("y", 5).error(), make_error_code(Errc::connection_refused)) << "wrong name";
  l->close();
  EXPECT_EQ(connect("x", 5).error(), make_error_code(Errc::connection_refused)) << "closed";
}

TEST_F(Loopback, PortZeroPicksAFreePortAndTakenPortsAreInUse) {
  auto a = loopback_listen(loop(), "n", 0, {}, [](Stream) {});
  auto b = loopback_listen(loop(), "n", 0, {}, [](Stream) {});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->port(), 0);
  EXPECT_NE(a->port(), b->port());
  EXPECT_EQ(loopback_listen(loop(), "n", a->port(), {}, [](Stream) {}).error(),
            errno_code(EADDRINUSE));
  EXPECT_TRUE(loopback_listen(loop(), "m", a->port(), {}, [](Stream) {}).ok()) << "another name";
  EXPECT_EQ(loopback_listen(loop(), "", 1, {}, [](Stream) {}).error(),
            make_error_code(Errc::invalid_argument));
}

TEST_F(Loopback, BufferSizeBoundsWhatIsInFlight) {
  LoopbackOptions small;
  small.buffer_size = 1000;
  auto [a, b] = loopback_pair(loop(), small);
  const std::string big(2500, 'x');
  auto w = a.write(bytes_of(big));
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(*w, 1000u);
  EXPECT_TRUE(a.write(bytes_of(big)).is(Errc::would_block));
  int writable = 0;
  a.on_writable([&] { ++writable; });
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(loop().run_once(Duration::zero()).ok());
  EXPECT_EQ(writable, 0) << "on_writable fired with a full pipe";
  std::array<char, 300> buf;
  ASSERT_EQ(b.read(buf.data(), buf.size()).value(), 300u);
  ASSERT_TRUE(loop().run_for([&] { return writable > 0; }, 5s));
  a.on_writable({});
  EXPECT_EQ(a.write(bytes_of(big)).value(), 300u);
}

TEST_F(Loopback, WritevTakesEveryPartInOneCall) {
  LoopbackOptions small;
  small.buffer_size = 10;
  auto [a, b] = loopback_pair(loop(), small);
  const std::string h = "head", e, p = "payload!";
  const std::array<std::span<const std::byte>, 3> parts{bytes_of(h), bytes_of(e), bytes_of(p)};
  auto w = a.writev(parts);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(*w, 10u) << "a prefix of the concatenation, across parts";
  auto got = drain(b);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, "headpayloa");
}

TEST_F(Loopback, CloseResetsThePeerAfterWhatItHadReceived) {
  auto [a, b] = loopback_pair(loop());
  ASSERT_TRUE(a.write(bytes_of("delivered")).ok());
  a.close();
  auto got = drain(b);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, "delivered");
  std::array<char, 16> buf;
  EXPECT_TRUE(b.read(buf.data(), buf.size()).is(Errc::connection_reset));
  EXPECT_TRUE(b.write(bytes_of("x")).is(Errc::connection_reset));
}

TEST_F(Loopback, CloseAfterBothDirectionsFinishedIsQuiet) {
  auto [a, b] = loopback_pair(loop());
  ASSERT_TRUE(b.write(bytes_of("last")).ok());
  ASSERT_TRUE(b.shutdown_write().ok());
  ASSERT_TRUE(a.write(bytes_of("bye")).ok());
  ASSERT_TRUE(a.shutdown_write().ok());
  auto at_a = drain(a);  // "last", then EOF
  ASSERT_TRUE(at_a.ok());
  EXPECT_EQ(*at_a, "last");
  a.close();
  auto at_b = drain(b);
  ASSERT_TRUE(at_b.ok()) << at_b.error().message();
  EXPECT_EQ(*at_b, "bye");
  std::array<char, 4> buf;
  EXPECT_EQ(b.read(buf.data(), buf.size()).value(), 0u) << "EOF, not a reset";
  EXPECT_FALSE(b.error());
}

TEST_F(Loopback, FailedConnectsComeFromTheFaults) {
  auto l = loopback_listen(loop(), "srv", 1, {}, [](Stream) {});
  ASSERT_TRUE(l.ok());
  LoopbackOptions o;
  o.faults = std::make_shared<LoopbackFaults>();
  o.faults->fail_connects(make_error_code(Errc::timeout), 2);
  EXPECT_TRUE(connect("srv", 1, o).is(Errc::timeout));
  EXPECT_TRUE(connect("srv", 1, o).is(Errc::timeout));
  EXPECT_TRUE(connect("srv", 1, o).ok()) << "the third connect is not failed";
}

TEST_F(Loopback, FailReadAfterBytesFailsThatStreamAndResetsThePeer) {
  LoopbackOptions faulty;
  faulty.faults = std::make_shared<LoopbackFaults>();
  faulty.faults->fail_read(errno_code(EIO), 5);
  auto [a, b] = loopback_pair(loop(), faulty);
  ASSERT_TRUE(b.write(bytes_of("0123456789")).ok());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(loop().run_once(Duration::zero()).ok());
  std::array<char, 64> buf;
  ASSERT_EQ(a.read(buf.data(), buf.size()).value(), 5u) << "the read up to the fault is short";
  EXPECT_EQ(a.read(buf.data(), buf.size()).error(), errno_code(EIO));
  EXPECT_EQ(a.error(), errno_code(EIO));
  EXPECT_EQ(a.write(bytes_of("x")).error(), errno_code(EIO));
  EXPECT_TRUE(b.read(buf.data(), buf.size()).is(Errc::connection_reset));
}

TEST_F(Loopback, FailReadWakesAWaitingReader) {
  LoopbackOptions faulty;
  faulty.faults = std::make_shared<LoopbackFaults>();
  auto pair = loopback_pair(loop(), faulty);  // named: the lambda captures it (clang 14)
  Stream& a = pair.first;
  std::error_code seen;
  a.on_readable([&] {
    std::array<char, 8> buf;
    seen = a.read(buf.data(), buf.size()).error();
    a.on_readable({});
  });
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(loop().run_once(Duration::zero()).ok());
  EXPECT_FALSE(seen) << "readable with nothing to read";
  faulty.faults->fail_read(make_error_code(Errc::device_error));
  ASSERT_TRUE(loop().run_for([&] { return static_cast<bool>(seen); }, 5s));
  EXPECT_EQ(seen, make_error_code(Errc::device_error));
}

TEST_F(Loopback, FailWriteAfterBytesIsAShortWriteThenTheError) {
  LoopbackOptions faulty;
  faulty.faults = std::make_shared<LoopbackFaults>();
  faulty.faults->fail_write(make_error_code(Errc::connection_reset), 4);
  auto [a, b] = loopback_pair(loop(), faulty);
  EXPECT_EQ(a.write(bytes_of("abcdef")).value(), 4u);
  EXPECT_TRUE(a.write(bytes_of("ef")).is(Errc::connection_reset));
  auto got = drain(b);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, "abcd") << "what was accepted before the fault arrives";
  std::array<char, 4> buf;
  EXPECT_TRUE(b.read(buf.data(), buf.size()).is(Errc::connection_reset));
  // One-shot: the next connection of this side runs clean.
  auto [c, d] = loopback_pair(loop(), faulty);
  EXPECT_EQ(c.write(bytes_of("abcdef")).value(), 6u);
}

TEST_F(Loopback, ResetAbortsEveryConnectionOfThatSide) {
  LoopbackOptions faulty;
  faulty.faults = std::make_shared<LoopbackFaults>();
  auto [a, b] = loopback_pair(loop(), faulty);
  auto [c, d] = loopback_pair(loop(), {}, faulty);
  auto [e, f] = loopback_pair(loop());
  ASSERT_TRUE(b.write(bytes_of("kept")).ok());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(loop().run_once(Duration::zero()).ok());
  faulty.faults->reset();
  auto at_a = drain(a);
  ASSERT_TRUE(at_a.ok());
  EXPECT_EQ(*at_a, "kept") << "delivered bytes are read before the reset";
  for (Stream* s : {&a, &b, &c, &d}) {
    EXPECT_EQ(s->error(), make_error_code(Errc::connection_reset));
    EXPECT_TRUE(s->write(bytes_of("x")).is(Errc::connection_reset));
  }
  EXPECT_FALSE(e.error()) << "another connection is untouched";
  EXPECT_TRUE(e.write(bytes_of("x")).ok());
}

TEST_F(Loopback, DelayHoldsBytesAndEofUntilTheTimer) {
  LoopbackOptions slow;
  slow.faults = std::make_shared<LoopbackFaults>();
  slow.faults->delay(30ms);
  auto ab = loopback_pair(loop(), slow);  // named: lambdas capture them (clang 14)
  [[maybe_unused]] auto& a = ab.first;
  [[maybe_unused]] auto& b = ab.second;
  const auto start = Clock::now();
  ASSERT_TRUE(a.write(bytes_of("late")).ok());
  ASSERT_TRUE(a.shutdown_write().ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(loop().run_once(Duration::zero()).ok());
  std::array<char, 16> buf;
  EXPECT_TRUE(b.read(buf.data(), buf.size()).is(Errc::would_block)) << "delivered before the delay";
  std::string got;
  bool eof = false;
  b.on_readable([&] {
    auto r = b.read(buf.data(), buf.size());
    if (r.ok() && *r == 0) eof = true;
    if (r.ok()) got.append(buf.data(), *r);
    if (eof || !r.ok()) b.on_readable({});
  });
  ASSERT_TRUE(loop().run_for([&] { return eof; }, 5s));
  EXPECT_GE(Clock::now() - start, 30ms);  // a timer never fires early
  EXPECT_EQ(got, "late");
  // The other direction has no delay.
  ASSERT_TRUE(b.write(bytes_of("now")).ok());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(loop().run_once(Duration::zero()).ok());
  EXPECT_EQ(a.read(buf.data(), buf.size()).value(), 3u);
}

TEST_F(Loopback, CloseDropsBytesStillInFlight) {
  LoopbackOptions slow;
  slow.faults = std::make_shared<LoopbackFaults>();
  slow.faults->delay(1h);
  auto [a, b] = loopback_pair(loop(), slow);
  ASSERT_TRUE(a.write(bytes_of("never")).ok());
  a.close();
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(loop().run_once(Duration::zero()).ok());
  std::array<char, 16> buf;
  EXPECT_TRUE(b.read(buf.data(), buf.size()).is(Errc::connection_reset));
}

}  // namespace
}  // namespace rmsg::testing
