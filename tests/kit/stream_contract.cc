// The cases of the Stream-contract suite (kit/stream_contract.h), each from a sentence of
// rmsg/stream.h. Random sizes and data come from the test seed (kit/seed.h).
#include "kit/stream_contract.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "kit/pattern.h"
#include "kit/seed.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;
constexpr Duration kDeadline = 60s;

std::vector<std::byte> random_data(std::size_t n, std::string_view what) {
  auto rng = test_rng(what);
  std::vector<std::byte> v(n);
  for (auto& b : v) b = static_cast<std::byte>(rng());
  return v;
}

std::span<const std::byte> as_bytes(const char* s) {
  return {reinterpret_cast<const std::byte*>(s), std::strlen(s)};
}

// Writes `data` in random sizes (by write(), or by writev() of random parts) whenever the
// stream is writable; shuts its side down at the end when asked.
class Sender {
 public:
  Sender(Stream& s, std::span<const std::byte> data, std::string_view what, bool gather,
         bool shutdown_at_end)
      : stream_(s), data_(data), rng_(seed_for(what)), gather_(gather), shutdown_(shutdown_at_end) {
    stream_.on_writable([this] { step(); });
  }
  Sender(const Sender&) = delete;
  Sender& operator=(const Sender&) = delete;
  ~Sender() {
    if (stream_) stream_.on_writable({});
  }

  bool done = false;
  std::error_code error;

 private:
  Result<std::size_t> write_some(std::span<const std::byte> rest) {
    if (!gather_)
      return stream_.write(rest.first(std::min(rest.size(), log_uniform(rng_, 1, 256 << 10))));
    std::array<std::span<const std::byte>, 6> parts;
    std::size_t at = 0;
    for (auto& p : parts) {  // zero-length parts included: writev skips them
      const std::size_t n = std::min(rest.size() - at, log_uniform(rng_, 1, 64 << 10) - 1);
      p = rest.subspan(at, n);
      at += n;
    }
    if (at == 0) parts[0] = rest.first(1);
    return stream_.writev(parts);
  }

  void step() {
    while (offset_ < data_.size()) {
      auto r = write_some(data_.subspan(offset_));
      if (!r) {
        if (r.is(Errc::would_block)) return;
        error = r.error();
        stream_.on_writable({});
        return;
      }
      offset_ += *r;
    }
    stream_.on_writable({});
    if (shutdown_) {
      if (auto r = stream_.shutdown_write(); !r) error = r.error();
    }
    done = true;
  }

  Stream& stream_;
  std::span<const std::byte> data_;
  std::mt19937_64 rng_;
  bool gather_;
  bool shutdown_;
  std::size_t offset_ = 0;
};

// Reads in random sizes whenever the stream is readable, until EOF or an error.
class Receiver {
 public:
  Receiver(Stream& s, std::string_view what) : stream_(s), rng_(seed_for(what)) {
    stream_.on_readable([this] { step(); });
  }
  Receiver(const Receiver&) = delete;
  Receiver& operator=(const Receiver&) = delete;
  ~Receiver() {
    if (stream_) stream_.on_readable({});
  }

  std::vector<std::byte> got;
  bool eof = false;
  std::error_code error;
  bool finished() const { return eof || error; }

 private:
  void step() {
    std::vector<std::byte> buf;
    while (!finished()) {
      buf.resize(log_uniform(rng_, 1, 128 << 10));
      auto r = stream_.read(buf);
      if (!r) {
        if (r.is(Errc::would_block)) return;
        error = r.error();
      } else if (*r == 0) {
        eof = true;
      } else {
        got.insert(got.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(*r));
      }
    }
    stream_.on_readable({});
  }

  Stream& stream_;
  std::mt19937_64 rng_;
};

// Writes the pattern from `offset` until write() would block; the bytes written.
std::size_t fill(Stream& s, const Pattern& pattern, std::uint64_t& offset) {
  std::size_t total = 0;
  for (;;) {
    auto r = s.write(pattern.at(offset, 64 << 10));
    if (!r) {
      EXPECT_TRUE(r.is(Errc::would_block)) << r.error().message();
      return total;
    }
    offset += *r;
    total += *r;
    if (total > (256u << 20)) {
      ADD_FAILURE() << "256 MiB written and no would_block: the peer does not hold back";
      return total;
    }
  }
}

}  // namespace

void StreamContract::SetUp() {
  transport_ = GetParam().make();
  ASSERT_NE(transport_, nullptr) << GetParam().name << " cannot run here";
}

void StreamContract::TearDown() {
  transport_.reset();
}

// "Copies up to data.size() bytes ... Copies out up to buf.size() bytes": every byte
// arrives once and in order, whatever the sizes on either side, both ways at once.
TEST_P(StreamContract, TransfersMiBsByteExactInRandomSizes) {
  auto [a, b] = connect_pair();
  ASSERT_TRUE(a && b);
  const auto ab = random_data((3u << 20) + 17, "a to b");
  const auto ba = random_data((1u << 20) + 5, "b to a");
  Sender sa(a, ab, "a writes", /*gather=*/false, true);
  Sender sb(b, ba, "b writes", /*gather=*/true, true);
  Receiver ra(a, "a reads"), rb(b, "b reads");
  ASSERT_TRUE(loop().run_for(
      [&] {
        return (sa.done || sa.error) && (sb.done || sb.error) && ra.finished() && rb.finished();
      },
      kDeadline));
  EXPECT_FALSE(sa.error) << sa.error.message();
  EXPECT_FALSE(sb.error) << sb.error.message();
  EXPECT_TRUE(rb.eof) << rb.error.message();
  EXPECT_TRUE(ra.eof) << ra.error.message();
  EXPECT_EQ(rb.got.size(), ab.size());
  EXPECT_TRUE(rb.got == ab) << "a to b differs";
  EXPECT_EQ(ra.got.size(), ba.size());
  EXPECT_TRUE(ra.got == ba) << "b to a differs";
}

// "Gather write: as write() of the parts' concatenation, in one call ... a prefix of the
// concatenation ... Empty parts are skipped; no parts at all (or only empty ones) return 0."
TEST_P(StreamContract, WritevEqualsWriteOfTheConcatenation) {
  auto pair = connect_pair();  // named, not bound: the lambdas below capture them (clang 14)
  Stream& a = pair.first;
  Stream& b = pair.second;
  ASSERT_TRUE(a && b);
  auto none = a.writev({});
  ASSERT_TRUE(none.ok()) << none.error().message();
  EXPECT_EQ(*none, 0u);
  const std::array<std::span<const std::byte>, 3> empties{};
  auto only_empty = a.writev(empties);
  ASSERT_TRUE(only_empty.ok()) << only_empty.error().message();
  EXPECT_EQ(*only_empty, 0u);

  // Random parts, zero-length ones among them; each call takes what it accepts off the front.
  const auto data = random_data((2u << 20) + 3, "concatenation");
  auto rng = test_rng("parts");
  std::vector<std::span<const std::byte>> parts;
  for (std::size_t at = 0; at < data.size();) {
    const std::size_t n = std::min(data.size() - at, log_uniform(rng, 1, 100 << 10) - 1);
    parts.push_back(std::span(data).subspan(at, n));
    at += n;
  }
  std::size_t next = 0, written = 0, calls = 0;
  std::error_code write_error;
  std::string violation;
  auto step = [&] {
    while (next < parts.size() && !write_error) {
      const std::size_t count = std::min<std::size_t>(parts.size() - next, 1 + rng() % 16);
      std::size_t asked = 0;
      for (std::size_t i = 0; i < count; ++i) asked += parts[next + i].size();
      auto r = a.writev(std::span(parts).subspan(next, count));
      ++calls;
      if (!r) {
        if (!r.is(Errc::would_block)) write_error = r.error();
        return;
      }
      if (*r > asked || (asked > 0 && *r == 0)) {
        violation = "writev of " + std::to_string(asked) + " bytes returned " + std::to_string(*r);
        write_error = make_error_code(Errc::invalid_argument);
        return;
      }
      written += *r;
      std::size_t left = *r;  // the accepted prefix comes off the front of the parts
      while (next < parts.size() && (left > 0 || parts[next].empty())) {
        const std::size_t take = std::min(left, parts[next].size());
        parts[next] = parts[next].subspan(take);
        left -= take;
        if (!parts[next].empty()) break;
        ++next;
      }
    }
    a.on_writable({});
    if (!write_error) {
      EXPECT_TRUE(a.shutdown_write().ok());
    }
  };
  a.on_writable(step);
  Receiver rb(b, "reads");
  ASSERT_TRUE(loop().run_for([&] { return rb.finished() || write_error; }, kDeadline));
  ASSERT_FALSE(write_error) << write_error.message() << violation << " after " << calls << " calls";
  EXPECT_EQ(written, data.size());
  EXPECT_TRUE(rb.eof) << rb.error.message();
  EXPECT_EQ(rb.got.size(), data.size());
  EXPECT_TRUE(rb.got == data) << "what writev sent differs from the concatenation";
}

// "Orderly close of our sending side: every byte already accepted is delivered, then the
// peer reads EOF. Reading stays possible."
TEST_P(StreamContract, EofAfterShutdownWriteComesAfterEveryByte) {
  auto [a, b] = connect_pair();
  ASSERT_TRUE(a && b);
  const auto data = random_data((1u << 20) + 3, "data");
  Sender sa(a, data, "writes", false, /*shutdown_at_end=*/true);
  Receiver rb(b, "reads");
  ASSERT_TRUE(loop().run_for([&] { return rb.finished(); }, kDeadline));
  ASSERT_TRUE(rb.eof) << rb.error.message();
  EXPECT_FALSE(sa.error) << sa.error.message();
  EXPECT_TRUE(rb.got == data) << rb.got.size() << " of " << data.size() << " bytes before EOF";
  std::byte byte{};
  auto again = b.read({&byte, 1});
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_EQ(*again, 0u) << "EOF is not repeated";

  // The other direction is still open: b answers, a (shut for writing) reads it and EOF.
  const auto reply = as_bytes("still reading after shutdown_write");
  auto w = b.write(reply);
  ASSERT_TRUE(w.ok()) << w.error().message();
  ASSERT_EQ(*w, reply.size());
  ASSERT_TRUE(b.shutdown_write().ok());
  Receiver ra(a, "a reads");
  ASSERT_TRUE(loop().run_for([&] { return ra.finished(); }, kDeadline));
  EXPECT_TRUE(ra.eof) << ra.error.message();
  EXPECT_TRUE(std::equal(ra.got.begin(), ra.got.end(), reply.begin(), reply.end()));
}

// "Errc::shutdown: write after shutdown_write()".
TEST_P(StreamContract, WriteAfterShutdownWriteIsShutdown) {
  auto [a, b] = connect_pair();
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a.shutdown_write().ok());
  EXPECT_TRUE(a.shutdown_write().ok()) << "a second shutdown_write is not a no-op";
  const auto bytes = as_bytes("late");
  EXPECT_EQ(a.write(bytes).error(), make_error_code(Errc::shutdown));
  const std::array<std::span<const std::byte>, 2> parts{bytes, bytes};
  EXPECT_EQ(a.writev(parts).error(), make_error_code(Errc::shutdown));
  EXPECT_FALSE(a.error()) << "shutdown_write is not a failure: " << a.error().message();
  Receiver rb(b, "reads");
  ASSERT_TRUE(loop().run_for([&] { return rb.finished(); }, kDeadline));
  EXPECT_TRUE(rb.eof) << rb.error.message();
  EXPECT_TRUE(rb.got.empty());
}

// "on_writable fires while write() would accept at least one byte or report an error":
// after shutdown_write, write() reports Errc::shutdown.
TEST_P(StreamContract, OnWritableFiresAfterShutdownWrite) {
  auto ab = connect_pair();  // named: lambdas capture them (clang 14)
  [[maybe_unused]] auto& a = ab.first;
  [[maybe_unused]] auto& b = ab.second;
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a.shutdown_write().ok());
  std::error_code seen;
  int fired = 0;
  a.on_writable([&] {
    ++fired;
    seen = a.write(as_bytes("x")).error();
    a.on_writable({});
  });
  loop().run_for([&] { return fired > 0; }, 5s);
  EXPECT_EQ(fired, 1) << "on_writable did not fire though write() reports an error";
  if (fired > 0) {
    EXPECT_EQ(seen, make_error_code(Errc::shutdown));
  }
}

// "Abortive close: unsent bytes are dropped, the peer sees connection_reset" (read() may
// first return bytes that arrived); "Errc::closed: any call after close()"; "once a stream
// failed, error() keeps the first error and every call returns it".
TEST_P(StreamContract, CloseGivesThePeerConnectionReset) {
  auto ab = connect_pair();  // named: lambdas capture them (clang 14)
  [[maybe_unused]] auto& a = ab.first;
  [[maybe_unused]] auto& b = ab.second;
  ASSERT_TRUE(a && b);
  const auto data = random_data(1000, "data");
  auto w = a.write(data);
  ASSERT_TRUE(w.ok()) << w.error().message();
  std::vector<std::byte> got;
  std::error_code failed;
  bool eof = false;
  b.on_readable([&] {
    std::array<std::byte, 4096> buf;
    for (;;) {
      auto r = b.read(buf);
      if (!r && r.is(Errc::would_block)) return;
      if (!r || *r == 0) {
        failed = r.error();
        eof = r.ok();  // EOF: not what close() promises
        b.on_readable({});
        return;
      }
      got.insert(got.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(*r));
    }
  });
  a.close();
  EXPECT_EQ(a.error(), make_error_code(Errc::closed));
  std::byte byte{};
  EXPECT_EQ(a.read({&byte, 1}).error(), make_error_code(Errc::closed));
  EXPECT_EQ(a.write(data).error(), make_error_code(Errc::closed));
  EXPECT_EQ(a.shutdown_write().error(), make_error_code(Errc::closed));

  ASSERT_TRUE(loop().run_for([&] { return failed || eof; }, kDeadline)) << "the peer saw nothing";
  EXPECT_FALSE(eof) << "the peer read EOF after " << got.size() << " bytes";
  EXPECT_EQ(failed, make_error_code(Errc::connection_reset)) << failed.message();
  EXPECT_LE(got.size(), data.size());
  EXPECT_TRUE(std::equal(got.begin(), got.end(), data.begin())) << "bytes before the reset differ";
  EXPECT_EQ(b.error(), make_error_code(Errc::connection_reset));
  EXPECT_EQ(b.write(data).error(), make_error_code(Errc::connection_reset));
  EXPECT_EQ(b.read({&byte, 1}).error(), make_error_code(Errc::connection_reset));
}

// "Errc::peer_closed: write after the peer closed its reading side": a peer that shut
// down its side, had its EOF read, then closed. Every transport lets the EOF stand here
// (RDMA: docs/protocol.md, Close; TCP: the lingering socket reads our bytes, and an RST
// in CLOSE_WAIT is EPIPE), so no reset: writes go through (read and dropped by a
// lingering peer) or fail with peer_closed, and read() keeps returning EOF.
TEST_P(StreamContract, CloseAfterShutdownWriteLeavesEofAndFailsWritesWithPeerClosed) {
  auto ab = connect_pair();  // named: lambdas capture them (clang 14)
  [[maybe_unused]] auto& a = ab.first;
  [[maybe_unused]] auto& b = ab.second;
  ASSERT_TRUE(a && b);
  const auto data = random_data(5000, "data");
  auto w = a.write(data);
  ASSERT_TRUE(w.ok()) << w.error().message();
  ASSERT_EQ(*w, data.size());
  ASSERT_TRUE(a.shutdown_write().ok());
  Receiver rb(b, "reads");
  ASSERT_TRUE(loop().run_for([&] { return rb.finished(); }, kDeadline));
  ASSERT_TRUE(rb.eof) << rb.error.message();
  EXPECT_TRUE(rb.got == data);
  a.close();
  // Writes go through until the close reaches b (or, against a lingering peer, for as
  // long as it lingers); then they fail.
  std::error_code write_error;
  int writes = 0;
  loop().run_for(
      [&] {
        write_error = b.write(as_bytes("?")).error();
        return ++writes >= 200 ||
               (write_error && write_error != make_error_code(Errc::would_block));
      },
      kDeadline);
  if (write_error) {
    EXPECT_EQ(write_error, make_error_code(Errc::peer_closed)) << write_error.message();
  }
  std::byte byte{};
  auto again = b.read({&byte, 1});
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_EQ(*again, 0u) << "the EOF does not stand";
}

// "On an empty handle (default-constructed or moved from), write(), read() and
// shutdown_write() return Errc::closed, the callback setters and close() do nothing,
// error() is Errc::closed, transport() "none" and the addresses empty."
TEST_P(StreamContract, EmptyHandlesReturnClosed) {
  auto [a, b] = connect_pair();
  ASSERT_TRUE(a && b);
  Stream moved_to = std::move(a);
  Stream never;
  for (Stream* s : {&a, &never}) {
    EXPECT_FALSE(s->valid());
    std::byte byte{};
    EXPECT_EQ(s->read({&byte, 1}).error(), make_error_code(Errc::closed));
    EXPECT_EQ(s->write(as_bytes("x")).error(), make_error_code(Errc::closed));
    const std::array<std::span<const std::byte>, 1> parts{as_bytes("x")};
    EXPECT_EQ(s->writev(parts).error(), make_error_code(Errc::closed));
    EXPECT_EQ(s->shutdown_write().error(), make_error_code(Errc::closed));
    EXPECT_EQ(s->error(), make_error_code(Errc::closed));
    EXPECT_STREQ(s->transport(), "none");
    EXPECT_TRUE(s->local_address().empty());
    EXPECT_TRUE(s->peer_address().empty());
    s->on_readable([] {});
    s->on_writable([] {});
    s->close();
  }
  // The moved-to handle is the connection.
  auto w = moved_to.write(as_bytes("moved"));
  ASSERT_TRUE(w.ok()) << w.error().message();
  ASSERT_TRUE(moved_to.shutdown_write().ok());
  Receiver rb(b, "reads");
  ASSERT_TRUE(loop().run_for([&] { return rb.finished(); }, kDeadline));
  EXPECT_TRUE(rb.eof) << rb.error.message();
  EXPECT_EQ(rb.got.size(), 5u);
}

// "would_block when nothing fits now"; "on_writable fires while write() would accept at
// least one byte": once the reader frees space, it fires and write() accepts bytes.
TEST_P(StreamContract, WouldBlockThenOnWritableFiresWhenSpaceFrees) {
  auto ab = connect_pair();  // named: lambdas capture them (clang 14)
  [[maybe_unused]] auto& a = ab.first;
  [[maybe_unused]] auto& b = ab.second;
  ASSERT_TRUE(a && b);
  const Pattern pattern(seed_for("pattern"));
  std::uint64_t sent = 0;
  const std::size_t first = fill(a, pattern, sent);
  ASSERT_GT(first, 0u);
  int fired = 0, blocked_in_callback = 0;
  std::size_t after = 0;
  a.on_writable([&] {
    ++fired;
    auto r = a.write(pattern.at(sent, 64 << 10));
    if (!r) {
      if (r.is(Errc::would_block)) ++blocked_in_callback;
      return;
    }
    sent += *r;
    after += *r;
    a.on_writable({});
  });
  std::uint64_t received = 0;
  bool mismatch = false, eof = false;
  std::error_code read_error;
  b.on_readable([&] {
    std::vector<std::byte> buf(32 << 10);
    for (;;) {
      auto r = b.read(buf);
      if (!r) {
        if (!r.is(Errc::would_block)) read_error = r.error();
        return;
      }
      if (*r == 0) {
        eof = true;
        b.on_readable({});
        return;
      }
      if (!pattern.matches(received, std::span(buf).first(*r))) mismatch = true;
      received += *r;
    }
  });
  ASSERT_TRUE(loop().run_for([&] { return after > 0 || read_error; }, kDeadline))
      << "on_writable never let a write through (fired " << fired << " times)";
  EXPECT_EQ(blocked_in_callback, 0) << "on_writable fired while write() would block";
  ASSERT_TRUE(a.shutdown_write().ok());
  ASSERT_TRUE(loop().run_for([&] { return eof || read_error; }, kDeadline));
  EXPECT_FALSE(read_error) << read_error.message();
  EXPECT_EQ(received, sent);
  EXPECT_FALSE(mismatch) << "bytes differ";
}

// "A callback may destroy or move the Stream it belongs to."
TEST_P(StreamContract, CallbackMayDestroyItsOwnStream) {
  auto [a, b] = connect_pair();
  ASSERT_TRUE(a && b);
  auto reader = std::make_unique<Stream>(std::move(b));
  int read_calls = 0;
  reader->on_readable([&] {
    ++read_calls;
    reader.reset();
  });
  auto writer = std::make_unique<Stream>(std::move(a));
  int write_calls = 0;
  writer->on_writable([&] {
    ++write_calls;
    auto r = writer->write(as_bytes("bye"));
    EXPECT_TRUE(r.ok()) << r.error().message();
    writer.reset();
  });
  ASSERT_TRUE(loop().run_for([&] { return read_calls > 0 && write_calls > 0; }, kDeadline));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(loop().run_once(Duration::zero()).ok());
  EXPECT_EQ(read_calls, 1);
  EXPECT_EQ(write_calls, 1);
}

}  // namespace rmsg::testing
