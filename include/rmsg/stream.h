// Stream: a transport-neutral, non-blocking, reliable byte stream (TCP or RDMA), owned by
// one EventLoop. Listener: the passive side that yields Streams.
//
// Threading: every method is loop-thread-only (the loop the stream was created on);
// callbacks run on that loop's thread.
//
// Readiness. on_readable's condition is "read() would not return would_block" (data, EOF
// or an error is pending); on_writable's is "write() would accept at least one byte or
// report an error". One rule for every transport:
//   - a readiness callback is called when its condition becomes true, and again after a
//     call only if that call made progress in its direction: read() (for on_readable) or
//     write()/writev() (for on_writable) returned bytes, would_block, or EOF or an error
//     for the first time. It is not called again while nothing changed: after a call that
//     made no progress (it did not read, or read only a repeated EOF/error) the callback
//     rests until the application calls read() (write()/writev()) on the stream - from
//     any callback or from outside one - or sets the callback again;
//   - a read()/write() that returns would_block, wherever it is called, arms its callback
//     for the moment the condition becomes true again (no readiness is lost: a writer
//     that saw would_block gets on_writable once the peer has read);
//   - setting a callback while its condition holds calls it once, deferred to the loop
//     (never inside the setter).
// So an idle stream with both callbacks set costs the loop nothing after at most one call
// each. A callback that declines to read (backpressure) calls read() or sets on_readable
// again when it wants to be told. Clear a callback (pass {}) when not interested. A
// callback may destroy or move the Stream it belongs to.
//
// Errors (error_code values; see rmsg/result.h for retryability):
//   Errc::would_block        nothing to read / no space to write now.
//   Errc::peer_closed        write after the peer closed its reading side (TCP EPIPE).
//   Errc::connection_reset   the peer aborted or the transport failed.
//   Errc::connection_refused connect: nothing listens there.
//   Errc::timeout            connect or retransmission deadline passed.
//   Errc::shutdown           write after shutdown_write().
//   Errc::closed             any call after close().
//   Errc::protocol_error     the peer broke the wire protocol (docs/protocol.md).
//   system/work-completion codes for transport-specific failures.
// Once a stream failed, error() keeps the first error and every call returns it (read()
// first returns the bytes received before the failure only where the transport can
// deliver them).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "rmsg/event_loop.h"
#include "rmsg/export.h"
#include "rmsg/result.h"

namespace rmsg {

class EventLoop;

// The interface each transport implements. Applications use Stream, not this.
class RMSG_EXPORT StreamImpl {
 public:
  StreamImpl() = default;
  StreamImpl(const StreamImpl&) = delete;
  StreamImpl& operator=(const StreamImpl&) = delete;
  StreamImpl(StreamImpl&&) = delete;
  StreamImpl& operator=(StreamImpl&&) = delete;
  virtual ~StreamImpl() = default;

  virtual Result<std::size_t> write(std::span<const std::byte> data) = 0;
  // Gather write (Stream::writev). This default writes part after part and stops at the
  // first short or refused one; transports override it to take every part in one call
  // (TCP: one writev(2); RDMA: one WR chain).
  virtual Result<std::size_t> writev(std::span<const std::span<const std::byte>> parts) {
    std::size_t total = 0;
    for (const auto part : parts) {
      if (part.empty()) continue;
      auto n = write(part);
      if (!n) {  // after a prefix, the error comes back on the next call
        if (total > 0) return total;
        return n.error();
      }
      total += n.value();
      if (n.value() < part.size()) break;
    }
    return total;
  }
  virtual Result<std::size_t> read(std::span<std::byte> buf) = 0;
  virtual void on_readable(Task callback) = 0;
  virtual void on_writable(Task callback) = 0;
  virtual Result<void> shutdown_write() = 0;
  virtual void close() = 0;
  virtual std::error_code error() const = 0;
  virtual const char* transport() const = 0;
  virtual std::string local_address() const = 0;
  virtual std::string peer_address() const = 0;
  virtual EventLoop& loop() const = 0;
  // The handle lets go of its implementation here, after close(). The default destroys
  // it; a transport that finishes a graceful close in the background (RDMA) keeps it,
  // owned by its loop, and destroys it itself.
  virtual void release(std::unique_ptr<StreamImpl> self) noexcept { self.reset(); }
};

class RMSG_EXPORT Stream {
 public:
  Stream() = default;
  explicit Stream(std::unique_ptr<StreamImpl> impl) : impl_(std::move(impl)) {}
  Stream(Stream&&) noexcept = default;
  Stream& operator=(Stream&& other) noexcept {
    if (this != &other) {
      reset();
      impl_ = std::move(other.impl_);
    }
    return *this;
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  // Destroying an open stream closes it (as close(): graceful after shutdown_write()).
  ~Stream() { reset(); }

  bool valid() const noexcept { return impl_ != nullptr; }
  explicit operator bool() const noexcept { return valid(); }

  class RMSG_HIDDEN Access;  // the transports' way to their implementation (not installed)

  // On an empty handle (default-constructed or moved from), write(), read() and
  // shutdown_write() return Errc::closed, the callback setters and close() do nothing,
  // error() is Errc::closed, transport() "none" and the addresses empty. loop() needs a
  // valid handle.

  // Copies up to data.size() bytes into the transport. Returns the count accepted (>= 1;
  // possibly fewer than asked) or an error; would_block when nothing fits now.
  Result<std::size_t> write(std::span<const std::byte> data) {
    if (!impl_) return make_error_code(Errc::closed);
    return impl_->write(data);
  }
  Result<std::size_t> write(const void* data, std::size_t len) {
    return write({static_cast<const std::byte*>(data), len});
  }
  // Gather write: as write() of the parts' concatenation, in one call (a framed message's
  // header and payload without copying them together first). Returns the count accepted
  // across the parts (>= 1; a prefix of the concatenation) or an error; would_block when
  // nothing fits now. Empty parts are skipped; no parts at all (or only empty ones) return 0.
  Result<std::size_t> writev(std::span<const std::span<const std::byte>> parts) {
    if (!impl_) return make_error_code(Errc::closed);
    return impl_->writev(parts);
  }
  // Copies out up to buf.size() bytes. Returns the count (>= 1), 0 at end of stream
  // (the peer's orderly shutdown, after every byte it sent), or an error; would_block
  // when nothing is there yet.
  Result<std::size_t> read(std::span<std::byte> buf) {
    if (!impl_) return make_error_code(Errc::closed);
    return impl_->read(buf);
  }
  Result<std::size_t> read(void* buf, std::size_t len) {
    return read({static_cast<std::byte*>(buf), len});
  }

  void on_readable(Task callback) {
    if (impl_) impl_->on_readable(std::move(callback));
  }
  void on_writable(Task callback) {
    if (impl_) impl_->on_writable(std::move(callback));
  }

  // Orderly close of our sending side: every byte already accepted is delivered, then
  // the peer reads EOF. Reading stays possible.
  Result<void> shutdown_write() {
    if (!impl_) return make_error_code(Errc::closed);
    return impl_->shutdown_write();
  }
  // Releases the stream; the handle is empty-like (Errc::closed) from here on and no
  // callback runs again. Two kinds:
  //   - graceful, after shutdown_write(): every byte already accepted and the EOF are
  //     delivered - never a reset, provided the peer keeps reading within the transport's
  //     linger timeout. The transport finishes in the background: the loop (or the
  //     connection manager) owns the lingering connection, reads and discards what the
  //     peer still sends until its EOF, then releases it; past the linger timeout, or
  //     when the loop is destroyed first, it aborts (the peer sees connection_reset).
  //     TCP: TcpOptions::linger_timeout (rmsg/tcp.h). RDMA: RdmaOptions::linger_timeout
  //     (rmsg/rdma.h); the stream lingers until the FIN's send completion (the peer's
  //     transport acknowledged it, after every byte), then disconnects.
  //   - abortive, without shutdown_write(): unsent bytes are dropped, the peer sees
  //     connection_reset (a connection already finished both ways - our shutdown_write()
  //     done and the peer's EOF read - closes quietly instead).
  // The resources are released (or recycled, under a connection manager).
  void close() {
    if (impl_) impl_->close();
  }

  std::error_code error() const { return impl_ ? impl_->error() : make_error_code(Errc::closed); }
  const char* transport() const { return impl_ ? impl_->transport() : "none"; }
  std::string local_address() const { return impl_ ? impl_->local_address() : std::string(); }
  std::string peer_address() const { return impl_ ? impl_->peer_address() : std::string(); }
  EventLoop& loop() const { return impl_->loop(); }

 private:
  void reset() {
    if (impl_) {
      impl_->close();
      StreamImpl* p = impl_.get();
      p->release(std::move(impl_));
    }
  }
  std::unique_ptr<StreamImpl> impl_;
};

// Delivered once, on the loop thread, with a connected Stream or the reason it failed.
using ConnectCallback = std::function<void(Result<Stream>)>;
// Delivered on the loop thread for every accepted connection.
using AcceptCallback = std::function<void(Stream)>;

// The passive side's handle: accepting continues until it is closed or destroyed, or until
// the listener fails (error() tells why).
class RMSG_EXPORT ListenerImpl {
 public:
  ListenerImpl() = default;
  ListenerImpl(const ListenerImpl&) = delete;
  ListenerImpl& operator=(const ListenerImpl&) = delete;
  ListenerImpl(ListenerImpl&&) = delete;
  ListenerImpl& operator=(ListenerImpl&&) = delete;
  virtual ~ListenerImpl() = default;
  virtual std::string local_address() const = 0;  // "ip:port", the bound port included
  virtual std::uint16_t port() const = 0;
  virtual void close() = 0;
  // Why the listener stopped accepting on its own ({} while it accepts; close() sets none).
  virtual std::error_code error() const { return {}; }
};

class RMSG_EXPORT Listener {
 public:
  Listener() = default;
  explicit Listener(std::unique_ptr<ListenerImpl> impl) : impl_(std::move(impl)) {}
  Listener(Listener&&) noexcept = default;
  Listener& operator=(Listener&&) noexcept = default;
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  ~Listener() = default;

  bool valid() const noexcept { return impl_ != nullptr; }
  std::string local_address() const { return impl_->local_address(); }
  std::uint16_t port() const { return impl_->port(); }
  void close() {
    if (impl_) impl_->close();
  }
  // Why the listener stopped accepting without close(): {} while it accepts. Set on the
  // loop thread when it happens; the accept callback is not called for it. An RDMA listener
  // whose device is removed (rdma_cm DEVICE_REMOVAL) reports Errc::device_error: it has let
  // go of the device (and of connections not yet accepted) at once, and accepts nothing
  // more; listen again on another address. A TCP listener reports nothing (its accept
  // errors are retried).
  std::error_code error() const { return impl_ ? impl_->error() : std::error_code{}; }

 private:
  std::unique_ptr<ListenerImpl> impl_;
};

}  // namespace rmsg
