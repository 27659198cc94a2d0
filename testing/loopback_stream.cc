// LoopbackStream: the data path of kit/loopback.h (pipes, faults, delivery, readiness).
#include "loopback_stream.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace rmsg::testing {

void LoopbackPipe::deliver_up_to(std::uint64_t seq) {
  for (auto& c : chunks) {
    if (!c.ready && c.seq <= seq) c.ready = true;
  }
  if (fin && fin_seq <= seq) fin_ready = true;
}

// Everything behind the first undelivered chunk is still in flight, even a chunk written
// without delay: delivery keeps the order.
void LoopbackPipe::drop_undelivered() {
  auto first = std::find_if(chunks.begin(), chunks.end(), [](const Chunk& c) { return !c.ready; });
  for (auto it = first; it != chunks.end(); ++it) queued -= it->bytes.size() - it->offset;
  chunks.erase(first, chunks.end());
  if (!fin_ready) fin = false;
}

bool LoopbackPipe::eof_delivered() const {
  return fin_ready &&
         std::all_of(chunks.begin(), chunks.end(), [](const Chunk& c) { return c.ready; });
}

void LoopbackPipe::clear() {
  chunks.clear();
  queued = 0;
}

LoopbackStream::LoopbackStream(std::shared_ptr<LoopbackLink> link, int side,
                               std::shared_ptr<LoopbackFaults> faults, std::string local,
                               std::string peer)
    : link_(std::move(link)),
      side_(side),
      faults_(std::move(faults)),
      local_(std::move(local)),
      peer_(std::move(peer)) {
  link_->end[side_] = this;
  if (faults_) faults_->attach(link_, side_);
}

LoopbackStream::~LoopbackStream() {
  close();
}

Result<std::size_t> LoopbackStream::write(std::span<const std::byte> data) {
  if (closed_) return Errc::closed;
  if (data.empty()) return Errc::invalid_argument;
  auto n = write_limit(data.size());
  if (!n) return n;
  arm(on_writable_);
  append({data.begin(), data.begin() + static_cast<std::ptrdiff_t>(*n)});
  return n;
}

// One chunk for the whole call: what the parts' concatenation would give to write().
Result<std::size_t> LoopbackStream::writev(std::span<const std::span<const std::byte>> parts) {
  if (closed_) return Errc::closed;
  std::size_t total = 0;
  for (const auto part : parts) total += part.size();
  if (total == 0) return std::size_t{0};
  auto n = write_limit(total);
  if (!n) return n;
  arm(on_writable_);
  std::vector<std::byte> bytes;
  bytes.reserve(*n);
  for (const auto part : parts) {
    const std::size_t take = std::min(part.size(), *n - bytes.size());
    bytes.insert(bytes.end(), part.begin(), part.begin() + static_cast<std::ptrdiff_t>(take));
    if (bytes.size() == *n) break;
  }
  append(std::move(bytes));
  return n;
}

Result<std::size_t> LoopbackStream::write_limit(std::size_t want) {
  if (error_) return report(error_);
  if (write_shut_) return Errc::shutdown;
  if (peer_gone_) return report(make_error_code(Errc::peer_closed));
  if (faults_) {
    auto& rule = faults_->write_rule();
    if (rule && write_total_ >= rule.after) {
      const auto ec = std::exchange(rule, {}).error;
      fail(ec);
      return report(ec);
    }
    if (rule) want = std::min(want, rule.after - write_total_);
  }
  const std::size_t n = std::min(want, out().space());
  if (n == 0) {
    arm(on_writable_);  // told when the reader frees space
    return Errc::would_block;
  }
  return n;
}

void LoopbackStream::arm(Direction& d) {
  ++d.uses;
  if (d.armed) return;
  d.armed = true;
  schedule_notify();
}

std::error_code LoopbackStream::report(std::error_code ec) {
  if (!error_reported_) {
    error_reported_ = true;
    arm(on_readable_);
    arm(on_writable_);
  }
  return ec;
}

void LoopbackStream::append(std::vector<std::byte> bytes) {
  LoopbackPipe& o = out();
  const Duration delay = faults_ ? faults_->current_delay() : Duration::zero();
  LoopbackPipe::Chunk c{std::move(bytes), 0, ++o.next_seq, delay <= Duration::zero()};
  write_total_ += c.bytes.size();
  o.queued += c.bytes.size();
  const std::uint64_t seq = c.seq;
  o.chunks.push_back(std::move(c));
  if (delay > Duration::zero()) arm_delivery(seq, delay);
  if (auto* p = peer()) p->schedule_notify();
}

// The timer holds the link weakly: a connection torn down before it fires loses the bytes.
void LoopbackStream::arm_delivery(std::uint64_t seq, Duration delay) {
  link_->loop.add_timer(delay, [weak = std::weak_ptr<LoopbackLink>(link_), side = side_, seq] {
    auto link = weak.lock();
    if (!link) return;
    link->pipe[side].deliver_up_to(seq);
    if (auto* reader = link->end[1 - side]) reader->schedule_notify();
  });
}

Result<std::size_t> LoopbackStream::read(std::span<std::byte> buf) {
  if (closed_) return Errc::closed;
  if (buf.empty()) return Errc::invalid_argument;
  std::size_t limit = buf.size();
  if (faults_ && faults_->read_rule() && !error_) {
    auto& rule = faults_->read_rule();
    if (read_total_ >= rule.after) {
      const auto ec = std::exchange(rule, {}).error;
      fail(ec);
      return report(ec);
    }
    limit = std::min(limit, rule.after - read_total_);
  }
  LoopbackPipe& p = in();
  std::size_t n = 0;
  while (n < limit && p.has_ready_bytes()) {
    auto& c = p.chunks.front();
    const std::size_t take = std::min(limit - n, c.bytes.size() - c.offset);
    std::memcpy(buf.data() + n, c.bytes.data() + c.offset, take);
    c.offset += take;
    n += take;
    if (c.offset == c.bytes.size()) p.chunks.pop_front();
  }
  if (n > 0) {
    p.queued -= n;
    read_total_ += n;
    arm(on_readable_);
    if (auto* writer = peer()) writer->schedule_notify();  // space freed
    return n;
  }
  if (error_) return report(error_);
  if (p.at_eof()) {
    if (!eof_read_) arm(on_readable_);  // a repeated EOF is no change
    eof_read_ = true;
    return std::size_t{0};
  }
  arm(on_readable_);
  return Errc::would_block;
}

void LoopbackStream::on_readable(Task callback) {
  if (closed_) return;
  on_readable_.callback = std::move(callback);
  on_readable_.armed = true;
  ++on_readable_.uses;  // a callback that replaces itself made a change
  schedule_notify();
}

void LoopbackStream::on_writable(Task callback) {
  if (closed_) return;
  on_writable_.callback = std::move(callback);
  on_writable_.armed = true;
  ++on_writable_.uses;
  schedule_notify();
}

Result<void> LoopbackStream::shutdown_write() {
  if (closed_) return Errc::closed;
  if (error_) return error_;
  if (write_shut_) return {};
  write_shut_ = true;
  LoopbackPipe& o = out();
  o.fin = true;
  o.fin_seq = ++o.next_seq;
  const Duration delay = faults_ ? faults_->current_delay() : Duration::zero();
  if (delay > Duration::zero()) {
    arm_delivery(o.fin_seq, delay);
  } else {
    o.fin_ready = true;
  }
  if (auto* p = peer()) p->schedule_notify();
  arm(on_writable_);  // write() now reports Errc::shutdown
  return {};
}

void LoopbackStream::close() {
  if (closed_) return;
  closed_ = true;
  on_readable_.callback = {};
  on_writable_.callback = {};
  const bool graceful = write_shut_ && !error_;
  const bool quiet = graceful && eof_read_;
  in().clear();
  link_->end[side_] = nullptr;
  if (auto* p = peer(); p != nullptr && !quiet) p->peer_closed(graceful);
}

// As RDMA (docs/protocol.md, Close) and TCP (an RST in CLOSE_WAIT is EPIPE): a stream that
// had received the closing peer's EOF reads the rest and EOF; only its writes fail.
// A graceful close (after shutdown_write) leaves our pipe to us: its bytes, delayed ones
// included, and the EOF still arrive, as a lingering TCP socket delivers them.
void LoopbackStream::peer_closed(bool graceful) {
  if (error_ || closed_) return;
  if (!graceful && !in().eof_delivered()) {
    return peer_failed(make_error_code(Errc::connection_reset));
  }
  peer_gone_ = true;
  schedule_notify();
}

void LoopbackStream::fail(std::error_code ec) {
  if (error_ || closed_) return;
  error_ = ec;
  in().clear();  // what this end had not read goes with the connection
  if (auto* p = peer()) p->peer_failed(make_error_code(Errc::connection_reset));
  schedule_notify();
}

void LoopbackStream::peer_failed(std::error_code ec) {
  if (error_ || closed_) return;
  error_ = ec;
  in().drop_undelivered();
  schedule_notify();
}

std::error_code LoopbackStream::error() const {
  if (error_) return error_;
  if (closed_) return make_error_code(Errc::closed);
  return {};
}

bool LoopbackStream::readable_now() const {
  const LoopbackPipe& p = link_->pipe[1 - side_];
  if (p.has_ready_bytes() || p.at_eof() || error_) return true;
  return faults_ && faults_->read_rule() && read_total_ >= faults_->read_rule().after;
}

bool LoopbackStream::writable_now() const {
  if (error_ || write_shut_ || peer_gone_ || link_->pipe[side_].space() > 0) return true;
  return faults_ && faults_->write_rule() && write_total_ >= faults_->write_rule().after;
}

void LoopbackStream::schedule_notify() {
  if (notify_scheduled_ || closed_) return;
  const auto due = [](const Direction& d, bool now) { return d.callback && d.armed && now; };
  if (!due(on_readable_, readable_now()) && !due(on_writable_, writable_now())) return;
  notify_scheduled_ = true;
  link_->loop.defer([this, due, weak = std::weak_ptr<int>(alive_)] {
    if (weak.expired()) return;
    notify_scheduled_ = false;
    if (closed_) return;
    for (Direction* d : {&on_readable_, &on_writable_}) {
      if (!due(*d, d == &on_readable_ ? readable_now() : writable_now())) continue;
      const Task cb = d->callback;  // the callback may replace itself
      const std::uint64_t uses = d->uses;
      cb();
      if (weak.expired() || closed_) return;
      if (d->uses == uses) d->armed = false;  // no progress: rest until read/write/set
    }
    schedule_notify();  // again next iteration after progress, while it still holds
  });
}

}  // namespace rmsg::testing
