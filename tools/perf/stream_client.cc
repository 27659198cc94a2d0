#include "stream_client.h"

#include <chrono>
#include <cstring>
#include <vector>

#include "wire.h"

namespace rmsg::perf {
namespace {

using Clock = std::chrono::steady_clock;

// Generous: only a hung peer gets near it; large runs print progress meanwhile.
constexpr auto kRunLimit = std::chrono::hours(1);

double ns_between(Clock::time_point a, Clock::time_point b) {
  return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count());
}

class ClientRun {
 public:
  ClientRun(Stream& s, const Spec& spec, Progress& progress)
      : s_(s),
        spec_(spec),
        progress_(progress),
        total_(spec.warmup + spec.iters),
        tx_(spec.size, std::byte{0x5a}),
        rx_(spec.test == Test::lat ? spec.size : 1) {
    m_.samples_ns.reserve(spec.iters);
  }

  Result<Measurement> run() {
    WireHeader h;
    h.test = static_cast<std::uint32_t>(spec_.test);
    h.size = spec_.size;
    h.count = total_;
    out_ = {reinterpret_cast<const std::byte*>(&h), sizeof h};
    s_.on_writable([this] { send_header(); });
    // run() rather than run_until(): it sleeps in epoll_wait without a timeout, as an
    // application's loop does; a bounded wait arms an hrtimer on every sleep, which costs
    // ~1 us per wakeup on loopback. The guard timer bounds a hung peer instead.
    auto& loop = s_.loop();
    const auto guard = loop.add_timer(kRunLimit, [this] { fail(make_error_code(Errc::timeout)); });
    if (auto r = loop.run(); !r) fail(r.error());
    loop.cancel_timer(guard);
    s_.on_writable({});
    s_.on_readable({});
    if (error_) return error_;
    if (!finished_) return Errc::timeout;
    return std::move(m_);
  }

 private:
  void send_header() {
    if (!write_out()) return;
    s_.on_writable({});
    start_ = Clock::now();
    last_ = start_;
    if (spec_.test == Test::lat) {
      s_.on_readable([this] { lat_read(); });
      lat_send();
    } else {
      s_.on_writable([this] { bw_write(); });
    }
  }

  // Writes out_; false while some is left (then on_writable is armed) or on error.
  bool write_out() {
    while (!out_.empty()) {
      auto n = s_.write(out_);
      if (!n) {
        if (!n.is(Errc::would_block)) fail(n.error());
        return false;
      }
      out_ = out_.subspan(*n);
    }
    return true;
  }

  void lat_send() {
    t0_ = Clock::now();
    out_ = tx_;
    if (!write_out() && !error_) {
      s_.on_writable([this] {
        if (write_out()) s_.on_writable({});
      });
    }
  }

  void lat_read() {
    auto n = s_.read(std::span(rx_).subspan(got_));
    if (!n) {
      if (!n.is(Errc::would_block)) fail(n.error());
      return;
    }
    if (*n == 0) return fail(make_error_code(Errc::peer_closed));
    got_ += *n;
    if (got_ < rx_.size()) return;
    const auto t1 = Clock::now();
    got_ = 0;
    if (done_ >= spec_.warmup) m_.samples_ns.push_back(ns_between(t0_, t1) / 2);
    if (done_ == spec_.warmup) start_ = t0_;
    progress_.update(++done_, total_);
    if (done_ == total_) {
      m_.elapsed_s = ns_between(start_, t1) / 1e9;
      finish();
      return;
    }
    lat_send();
  }

  void bw_write() {
    for (;;) {
      auto n = s_.write(std::span(tx_).subspan(off_));
      if (!n) {
        if (!n.is(Errc::would_block)) fail(n.error());
        return;
      }
      off_ += *n;
      if (off_ < tx_.size()) continue;
      off_ = 0;
      const auto now = Clock::now();
      if (done_ >= spec_.warmup) m_.samples_ns.push_back(ns_between(last_, now));
      if (done_ + 1 == spec_.warmup) start_ = now;  // the measured messages start here
      last_ = now;
      progress_.update(++done_, total_);
      if (done_ == total_) break;
    }
    s_.on_writable({});
    s_.on_readable([this] { bw_ack(); });
  }

  void bw_ack() {
    auto n = s_.read(rx_);
    if (!n) {
      if (!n.is(Errc::would_block)) fail(n.error());
      return;
    }
    if (*n == 0) return fail(make_error_code(Errc::peer_closed));
    m_.elapsed_s = ns_between(start_, Clock::now()) / 1e9;
    finish();
  }

  void fail(std::error_code ec) {
    if (!error_) error_ = ec;
    finish();
  }

  void finish() {
    finished_ = true;
    s_.loop().stop();
  }

  Stream& s_;
  const Spec& spec_;
  Progress& progress_;
  const std::uint64_t total_;
  std::vector<std::byte> tx_;
  std::vector<std::byte> rx_;
  std::span<const std::byte> out_;
  std::size_t off_ = 0;
  std::size_t got_ = 0;
  std::uint64_t done_ = 0;
  bool finished_ = false;
  std::error_code error_;
  Clock::time_point start_;
  Clock::time_point t0_;
  Clock::time_point last_;
  Measurement m_;
};

}  // namespace

Result<Measurement> run_stream_client(Stream& stream, const Spec& spec, Progress& progress) {
  ClientRun run(stream, spec, progress);
  return run.run();
}

}  // namespace rmsg::perf
