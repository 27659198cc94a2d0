// RelayPump: loop 0's end of a relayed connection (relay_pump.h).
#include "msg/relay_pump.h"

#include <array>
#include <utility>

namespace rmsg::msg {

using C = RelayChannel;

namespace {
constexpr std::size_t kChunk = 64 * 1024;
}

RelayPump::RelayPump(Stream real, std::shared_ptr<RelayChannel> channel,
                     std::vector<std::byte> pending, std::function<void()> done)
    : real_(std::move(real)),
      channel_(std::move(channel)),
      out_(std::move(pending)),
      done_(std::move(done)) {
  channel_->set_handler(C::kNear, [this] { run(); });
  real_.on_readable([this] { run(); });
  real_.on_writable([this] { run(); });
  channel_->wake(C::kNear);
}

RelayPump::~RelayPump() {
  channel_->set_handler(C::kNear, {});
  // Gone before the owner closed (shutdown): both ends reset.
  channel_->finish(C::kNear, make_error_code(Errc::connection_reset));
  channel_->finish(C::kFar, make_error_code(Errc::connection_reset));
  real_.on_readable({});
  real_.on_writable({});
  real_.close();  // abortive unless shutdown_write() was passed on
}

void RelayPump::run() {
  // The stream's callbacks and the channel's wake-ups all land here; a call from inside
  // a call (a write that makes the stream call back at once) runs the loop again instead.
  if (running_) {
    again_ = true;
    return;
  }
  running_ = true;
  do {
    again_ = false;
    if (!finished_) inbound();
    if (!finished_) outbound();
    // Done once the owner's end was passed on and it let go (after a shutdown, the real
    // stream's close is graceful and delivers it).
    if (!finished_ && out_done_ && channel_->is_far_closed()) finish();
  } while (again_ && !finished_);
  running_ = false;
}

void RelayPump::inbound() {
  if (in_done_) return;
  std::array<std::byte, kChunk> buf;
  while (true) {
    if (channel_->is_far_closed()) return;  // the owner reads no more
    const std::size_t room = channel_->room(C::kNear);
    if (room == 0) return;  // the owner's wake-up after a read calls read() again
    auto n = real_.read(std::span(buf).first(std::min(room, buf.size())));
    if (!n) {
      if (n.error() == make_error_code(Errc::would_block)) return;
      in_done_ = true;
      channel_->finish(C::kNear, n.error());
      return;
    }
    if (n.value() == 0) {
      in_done_ = true;
      channel_->finish(C::kNear, {});
      return;
    }
    channel_->push(C::kNear, std::span(buf).first(n.value()));
    channel_->wake(C::kFar);
  }
}

void RelayPump::outbound() {
  while (!out_done_) {
    if (out_off_ == out_.size()) {
      out_.resize(kChunk);
      const auto got = channel_->pull(C::kNear, out_);
      out_.resize(got.n);
      out_off_ = 0;
      if (got.n > 0) channel_->wake(C::kFar);  // room for the owner's writes
      if (got.n == 0) {
        if (got.error) {  // the owner closed without a shutdown: reset
          out_done_ = true;
          return finish();
        }
        if (!got.eof && channel_->is_far_closed()) {  // gone without ending: reset
          out_done_ = true;
          return finish();
        }
        if (got.eof) {
          out_done_ = true;
          (void)real_.shutdown_write();
        }
        return;
      }
    }
    auto n = real_.write(std::span(out_).subspan(out_off_));
    if (!n) {
      if (n.error() == make_error_code(Errc::would_block)) return;
      out_done_ = true;
      in_done_ = true;
      channel_->finish(C::kNear, n.error());
      return finish();
    }
    out_off_ += n.value();
  }
}

void RelayPump::finish() {
  if (finished_) return;
  finished_ = true;
  real_.on_readable({});
  real_.on_writable({});
  channel_->set_handler(C::kNear, {});
  // Graceful when the owner's shutdown was passed on (Stream::close then lingers and
  // delivers it), abortive otherwise.
  real_.close();
  real_.loop().defer([done = done_] { done(); });
}

}  // namespace rmsg::msg
