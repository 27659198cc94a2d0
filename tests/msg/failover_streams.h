// A StreamFactory over the ConnectionManager for the failover tests in the Soft-RoCE
// guest: it keeps the live streams it handed out (so a test can reach an RDMA stream's QP
// and route a synthetic QP_FATAL to it) and owns the real RDMA listener behind the one it
// hands the messenger, so a test can close it (RDMA connects are refused, the TCP
// listener stays) and reopen it on the same port.
#pragma once

#include <infiniband/verbs.h>

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "msg/seams.h"
#include "rdma/seams.h"
#include "rmsg/connection_manager.h"

namespace rmsg::testing {

class TrackedStream;
using StreamRegistry = std::set<TrackedStream*>;

// A pass-through stream in a registry while it lives.
class TrackedStream final : public StreamImpl {
 public:
  TrackedStream(Stream inner, EventLoop& loop, std::shared_ptr<StreamRegistry> registry)
      : inner_(std::move(inner)), loop_(loop), registry_(std::move(registry)) {
    registry_->insert(this);
  }
  ~TrackedStream() override { registry_->erase(this); }
  const Stream& inner() const noexcept { return inner_; }

  Result<std::size_t> write(std::span<const std::byte> data) override { return inner_.write(data); }
  Result<std::size_t> writev(std::span<const std::span<const std::byte>> parts) override {
    return inner_.writev(parts);
  }
  Result<std::size_t> read(std::span<std::byte> buf) override { return inner_.read(buf); }
  void on_readable(Task cb) override { inner_.on_readable(std::move(cb)); }
  void on_writable(Task cb) override { inner_.on_writable(std::move(cb)); }
  Result<void> shutdown_write() override { return inner_.shutdown_write(); }
  void close() override { inner_.close(); }
  std::error_code error() const override { return inner_.error(); }
  const char* transport() const override { return inner_.transport(); }
  std::string local_address() const override { return inner_.local_address(); }
  std::string peer_address() const override { return inner_.peer_address(); }
  EventLoop& loop() const override { return loop_; }

 private:
  Stream inner_;
  EventLoop& loop_;
  std::shared_ptr<StreamRegistry> registry_;
};

class FailoverStreams final : public StreamFactory {
 public:
  explicit FailoverStreams(EventLoop& loop) : loop_(loop) {
    // As the messenger's own manager (manager_streams.cc): default options.
    cm_ = ConnectionManager::create(loop).value();
  }
  ~FailoverStreams() override { *live_ = false; }

  void connect(const ConnectionParams& params, ConnectCallback done) override {
    auto live = live_;
    cm_->connect(params, [this, live, done = std::move(done)](Result<Stream> r) {
      if (!*live || !r) return done(std::move(r));
      done(wrap(std::move(r).value()));
    });
  }
  Result<Listener> listen(const SocketAddress& address, const ConnectionParams& params,
                          AcceptCallback on_accept) override {
    if (params.transport != Transport::rdma) {
      return cm_->listen(address, params,
                         [this, cb = std::move(on_accept)](Stream s) { cb(wrap(std::move(s))); });
    }
    rdma_params_ = params;
    rdma_accept_ = std::move(on_accept);
    auto l = open(address);
    if (!l) return l.error();
    rdma_address_ = SocketAddress::parse(rdma_->local_address()).value();
    return Listener(std::make_unique<Proxy>(this, rdma_->local_address(), rdma_->port()));
  }

  // The QPs of the live RDMA streams (null entries left out).
  std::vector<ibv_qp*> rdma_qps() const {
    std::vector<ibv_qp*> qps;
    for (const TrackedStream* s : *registry_) {
      if (ibv_qp* qp = rdma::stream_qp(s->inner())) qps.push_back(qp);
    }
    return qps;
  }
  // Stops accepting RDMA (connects are refused) / accepts again on the same address.
  void close_rdma_listener() {
    if (rdma_) rdma_->close();
    rdma_.reset();
  }
  Result<void> reopen_rdma_listener() {
    auto l = open(rdma_address_);
    if (!l) return l.error();
    return {};
  }

 private:
  struct Proxy final : ListenerImpl {
    Proxy(FailoverStreams* f, std::string address, std::uint16_t port)
        : owner(f), addr(std::move(address)), p(port) {}
    std::string local_address() const override { return addr; }
    std::uint16_t port() const override { return p; }
    void close() override { owner->close_rdma_listener(); }
    FailoverStreams* owner;
    std::string addr;
    std::uint16_t p;
  };

  Result<void> open(const SocketAddress& address) {
    auto l =
        cm_->listen(address, rdma_params_, [this](Stream s) { rdma_accept_(wrap(std::move(s))); });
    if (!l) return l.error();
    rdma_ = std::make_unique<Listener>(std::move(l).value());
    return {};
  }
  Stream wrap(Stream inner) {
    return Stream(std::make_unique<TrackedStream>(std::move(inner), loop_, registry_));
  }

  EventLoop& loop_;
  std::unique_ptr<ConnectionManager> cm_;
  std::shared_ptr<StreamRegistry> registry_ = std::make_shared<StreamRegistry>();
  std::shared_ptr<bool> live_ = std::make_shared<bool>(true);
  ConnectionParams rdma_params_;
  AcceptCallback rdma_accept_;
  std::unique_ptr<Listener> rdma_;
  SocketAddress rdma_address_;
};

}  // namespace rmsg::testing
