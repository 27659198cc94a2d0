// RelayStream: the owner shard's end of a relayed connection (relay_stream.h).
#include "msg/relay_stream.h"

#include <algorithm>
#include <utility>

namespace rmsg::msg {

using C = RelayChannel;

RelayStream::RelayStream(EventLoop& loop, std::shared_ptr<RelayChannel> channel, RelayEnds ends,
                         std::size_t skip)
    : loop_(loop), channel_(std::move(channel)), ends_(std::move(ends)), skip_(skip) {}

RelayStream::~RelayStream() {
  close();
  // Made on loop 0 and handed over: the handler is set on the first call on this loop's
  // thread (on_readable/on_writable), so it is cleared here, on the same thread.
  channel_->set_handler(C::kFar, {});
}

Result<std::size_t> RelayStream::write(std::span<const std::byte> data) {
  if (closed_) return make_error_code(Errc::closed);
  if (error_) return error_;
  if (shut_) return make_error_code(Errc::shutdown);
  if (auto e = channel_->write_error(C::kFar)) {
    fail(e);
    write_armed_ = true;
    return e;
  }
  if (data.empty()) return std::size_t{0};
  std::size_t dropped = std::min(skip_, data.size());
  skip_ -= dropped;
  const std::size_t n = dropped + channel_->push(C::kFar, data.subspan(dropped));
  write_armed_ = true;
  if (n == 0) return make_error_code(Errc::would_block);
  if (n > dropped) channel_->wake(C::kNear);
  if (channel_->room(C::kFar) > 0) channel_->wake(C::kFar);  // writable still holds
  return n;
}

Result<std::size_t> RelayStream::read(std::span<std::byte> buf) {
  if (closed_) return make_error_code(Errc::closed);
  const auto got = channel_->pull(C::kFar, buf);
  if (got.n > 0) {
    read_armed_ = true;
    channel_->wake(C::kNear);  // room for the pump
    if (channel_->readable(C::kFar)) channel_->wake(C::kFar);
    return got.n;
  }
  if (got.error || got.eof) {
    read_armed_ = !end_seen_;  // a repeated end is no progress: the callback rests
    end_seen_ = true;
    if (got.error) {
      fail(got.error);
      return got.error;
    }
    return std::size_t{0};
  }
  read_armed_ = true;
  return make_error_code(Errc::would_block);
}

void RelayStream::on_readable(Task callback) {
  readable_ = std::move(callback);
  read_armed_ = readable_ != nullptr;
  channel_->set_handler(C::kFar, [this] { on_wake(); });
  if (read_armed_) channel_->wake(C::kFar);  // called once, deferred, if it holds
}

void RelayStream::on_writable(Task callback) {
  writable_ = std::move(callback);
  write_armed_ = writable_ != nullptr;
  channel_->set_handler(C::kFar, [this] { on_wake(); });
  if (write_armed_) channel_->wake(C::kFar);
}

void RelayStream::on_wake() {
  if (closed_) return;
  const auto alive = alive_.token();
  if (readable_ && read_armed_ && channel_->readable(C::kFar)) {
    read_armed_ = false;
    Task cb = readable_;
    cb();
    if (!alive.alive() || closed_) return;
  }
  const bool can_write = channel_->room(C::kFar) > 0 || channel_->write_error(C::kFar) || shut_;
  if (writable_ && write_armed_ && can_write) {
    write_armed_ = false;
    Task cb = writable_;
    cb();
  }
}

Result<void> RelayStream::shutdown_write() {
  if (closed_) return make_error_code(Errc::closed);
  if (shut_) return {};
  shut_ = true;
  channel_->finish(C::kFar, {});
  return {};
}

void RelayStream::close() {
  if (closed_) return;
  closed_ = true;
  readable_ = nullptr;
  writable_ = nullptr;
  // Without shutdown_write() the close is abortive: the pump resets the real stream. After
  // it, the pump delivers what was written and closes the real stream gracefully.
  if (!shut_) channel_->finish(C::kFar, make_error_code(Errc::connection_reset));
  channel_->far_closed();
}

}  // namespace rmsg::msg
