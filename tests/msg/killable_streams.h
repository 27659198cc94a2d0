// A StreamFactory over real streams (the ConnectionManager's: TCP or RDMA) that can kill
// them under the messenger: kill_all() closes every live stream abortively, as a failing
// network or a crashed peer process would; the peer sees a real reset (TCP RST, RDMA
// disconnect) and the messenger's own side reads connection_reset.
#pragma once

#include <memory>
#include <set>
#include <utility>

#include "msg/seams.h"
#include "rmsg/connection_manager.h"

namespace rmsg::testing {

class KillableStream;
using KillRegistry = std::set<KillableStream*>;

class KillableStream final : public StreamImpl {
 public:
  KillableStream(Stream inner, EventLoop& loop, std::shared_ptr<KillRegistry> registry)
      : inner_(std::move(inner)), loop_(loop), registry_(std::move(registry)) {
    registry_->insert(this);
  }
  // Aborts the real stream now; our side learns on its next read (woken here).
  void kill() {
    if (killed_) return;
    killed_ = true;
    inner_.close();
    if (readable_) {
      auto alive = alive_;
      loop_.defer([alive, this] {
        if (*alive && readable_) readable_();
      });
    }
  }
  bool dead() const noexcept { return killed_ || closed_; }
  ~KillableStream() override {
    *alive_ = false;
    registry_->erase(this);
  }

  Result<std::size_t> write(std::span<const std::byte> data) override {
    if (killed_) return make_error_code(Errc::connection_reset);
    return inner_.write(data);
  }
  Result<std::size_t> writev(std::span<const std::span<const std::byte>> parts) override {
    if (killed_) return make_error_code(Errc::connection_reset);
    return inner_.writev(parts);
  }
  Result<std::size_t> read(std::span<std::byte> buf) override {
    if (killed_) return make_error_code(Errc::connection_reset);
    return inner_.read(buf);
  }
  void on_readable(Task cb) override {
    readable_ = cb;
    if (!killed_) inner_.on_readable(std::move(cb));
  }
  void on_writable(Task cb) override {
    if (!killed_) inner_.on_writable(std::move(cb));
  }
  Result<void> shutdown_write() override {
    if (killed_) return make_error_code(Errc::connection_reset);
    return inner_.shutdown_write();
  }
  void close() override {
    closed_ = true;
    readable_ = {};
    inner_.close();
  }
  std::error_code error() const override {
    return killed_ ? make_error_code(Errc::connection_reset) : inner_.error();
  }
  const char* transport() const override { return inner_.transport(); }
  std::string local_address() const override { return inner_.local_address(); }
  std::string peer_address() const override { return inner_.peer_address(); }
  EventLoop& loop() const override { return loop_; }

 private:
  Stream inner_;
  EventLoop& loop_;
  std::shared_ptr<KillRegistry> registry_;
  Task readable_;
  bool killed_ = false;
  bool closed_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

class KillableStreams final : public StreamFactory {
 public:
  explicit KillableStreams(EventLoop& loop) : loop_(loop) {
    cm_ = ConnectionManager::create(loop).value();
  }
  void connect(const ConnectionParams& params, ConnectCallback done) override {
    auto self = live_;
    cm_->connect(params, [this, self, done = std::move(done)](Result<Stream> r) {
      if (!*self || !r) return done(std::move(r));
      done(wrap(std::move(r).value()));
    });
  }
  Result<Listener> listen(const SocketAddress& address, const ConnectionParams& params,
                          AcceptCallback on_accept) override {
    return cm_->listen(address, params, [this, on_accept = std::move(on_accept)](Stream s) {
      on_accept(wrap(std::move(s)));
    });
  }
  // Kills every stream still open; returns how many.
  int kill_all() {
    int n = 0;
    const KillRegistry live = *registry_;  // kill() may not erase, but be safe
    for (KillableStream* s : live) {
      if (!s->dead()) {
        s->kill();
        ++n;
      }
    }
    return n;
  }
  ~KillableStreams() override { *live_ = false; }
  // The manager behind the streams (its structure counters: reuse by reconnects).
  ConnectionManager& manager() { return *cm_; }

 private:
  // The wrapper is owned by the Stream handed out; it is in the registry while it lives.
  Stream wrap(Stream inner) {
    return Stream(std::make_unique<KillableStream>(std::move(inner), loop_, registry_));
  }

  EventLoop& loop_;
  std::unique_ptr<ConnectionManager> cm_;
  std::shared_ptr<KillRegistry> registry_ = std::make_shared<KillRegistry>();
  std::shared_ptr<bool> live_ = std::make_shared<bool>(true);
};

}  // namespace rmsg::testing
