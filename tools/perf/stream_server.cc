#include "stream_server.h"

#include <cstring>
#include <vector>

#include "wire.h"

namespace rmsg::perf {

class StreamServer::Session {
 public:
  Session(StreamServer& owner, std::uint64_t id, Stream stream)
      : owner_(owner), id_(id), stream_(std::move(stream)) {
    stream_.on_readable([this] { on_readable(); });
  }

 private:
  enum class Phase { header, echo, sink, drain };
  static constexpr std::size_t kBuffer = 256 << 10;

  void on_readable() {
    switch (phase_) {
      case Phase::header:
        return read_header();
      case Phase::echo:
        return echo();
      case Phase::sink:
        return sink();
      case Phase::drain:
        return drain();
    }
  }

  // Reads exactly the header: payload may follow in the same segment.
  void read_header() {
    auto* dst = reinterpret_cast<std::byte*>(&header_) + header_got_;
    auto n = stream_.read({dst, sizeof header_ - header_got_});
    if (!check(n)) return;
    header_got_ += *n;
    if (header_got_ < sizeof header_) return;
    if (!valid(header_)) return done();
    buf_.resize(static_cast<std::size_t>(std::min<std::uint64_t>(header_.size, kBuffer)));
    expect_ = header_.size * header_.count;
    phase_ = header_.test == static_cast<std::uint32_t>(Test::lat) ? Phase::echo : Phase::sink;
  }

  void echo() {
    auto n = stream_.read(buf_);
    if (!check(n)) return;
    pending_ = {buf_.data(), *n};
    flush();
  }

  // Sends what echo() read; while some is unsent, stop reading (backpressure).
  void flush() {
    while (!pending_.empty()) {
      auto n = stream_.write(pending_);
      if (!n) {
        if (!n.is(Errc::would_block)) return done();
        if (!paused_) {
          paused_ = true;
          stream_.on_readable({});
          stream_.on_writable([this] { flush(); });
        }
        return;
      }
      pending_ = pending_.subspan(*n);
    }
    if (paused_) {
      paused_ = false;
      stream_.on_writable({});
      stream_.on_readable([this] { on_readable(); });
    }
  }

  void sink() {
    // Read while reads fill the buffer: a short read means the socket is drained.
    for (;;) {
      auto n = stream_.read(buf_);
      if (!check(n)) return;
      got_ += *n;
      if (got_ >= expect_) break;
      if (*n < buf_.size()) return;
    }
    const std::byte ack{1};
    auto w = stream_.write({&ack, 1});
    if (!w) return done();
    phase_ = Phase::drain;
  }

  void drain() {
    auto n = stream_.read(buf_);
    check(n);
  }

  // Handles would_block, EOF and errors; true when n holds bytes to use.
  bool check(const Result<std::size_t>& n) {
    if (n.ok() && n.value() > 0) return true;
    if (!n.ok() && n.is(Errc::would_block)) return false;
    done();
    return false;
  }

  void done() {
    stream_.on_readable({});
    stream_.on_writable({});
    owner_.finished(id_);
  }

  StreamServer& owner_;
  std::uint64_t id_;
  Stream stream_;
  Phase phase_ = Phase::header;
  WireHeader header_;
  std::size_t header_got_ = 0;
  std::vector<std::byte> buf_;
  std::span<const std::byte> pending_;
  bool paused_ = false;
  std::uint64_t expect_ = 0;
  std::uint64_t got_ = 0;
};

StreamServer::StreamServer(EventLoop& loop)
    : loop_(loop), self_(std::make_shared<StreamServer*>(this)) {}

StreamServer::~StreamServer() = default;

void StreamServer::accept(Stream stream) {
  const auto id = next_id_++;
  sessions_.emplace(id, std::make_unique<Session>(*this, id, std::move(stream)));
}

void StreamServer::finished(std::uint64_t id) {
  // Not inside the session's own callback: destroy it after this iteration.
  loop_.defer([self = std::weak_ptr<StreamServer*>(self_), id] {
    if (auto s = self.lock()) (*s)->sessions_.erase(id);
  });
}

}  // namespace rmsg::perf
