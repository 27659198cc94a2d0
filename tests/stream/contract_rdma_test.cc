// The Stream contract on RDMA (Soft-RoCE guest: RMSG_RDMA_ADDR names the address; without
// it or a device, every case fails), default ring geometry and the tests' RdmaOptions.
#include <chrono>
#include <cstdlib>
#include <deque>
#include <memory>
#include <optional>

#include "kit/rdma_fixture.h"
#include "kit/stream_contract.h"
#include "rmsg/rdma.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;

class RdmaTransport final : public ContractTransport {
 public:
  RdmaTransport(std::unique_ptr<EventLoop> loop, SocketAddress address)
      : loop_(std::move(loop)), address_(address) {}
  EventLoop& loop() override { return *loop_; }

  std::pair<Stream, Stream> connect_pair() override {
    if (!listener_.valid()) {
      auto l = rdma_listen(*loop_, address_, test_options(),
                           [this](Stream s) { accepted_.push_back(std::move(s)); });
      if (!l) {
        ADD_FAILURE() << "rdma_listen: " << l.error().message();
        return {};
      }
      listener_ = std::move(l).value();
    }
    SocketAddress peer = address_;
    peer.set_port(listener_.port());
    std::optional<Result<Stream>> client;
    rdma_connect(*loop_, peer, test_options(),
                 [&](Result<Stream> r) { client.emplace(std::move(r)); });
    if (!loop_->run_for([&] { return client && !accepted_.empty(); }, 20s) || !client->ok()) {
      ADD_FAILURE() << "rdma connect: " << (client ? client->error().message() : "pending");
      return {};
    }
    Stream server = std::move(accepted_.front());
    accepted_.pop_front();
    return {std::move(*client).value(), std::move(server)};
  }

 private:
  std::unique_ptr<EventLoop> loop_;
  SocketAddress address_;
  Listener listener_;
  std::deque<Stream> accepted_;
};

std::unique_ptr<ContractTransport> make_rdma() {
  const char* addr = std::getenv("RMSG_RDMA_ADDR");
  if (addr == nullptr) {
    ADD_FAILURE() << "RMSG_RDMA_ADDR is not set: run RDMA tests in the Soft-RoCE guest";
    return nullptr;
  }
  auto a = SocketAddress::from_host_port(addr, 0);
  if (!a || !rdma_device_available()) {
    ADD_FAILURE() << "RMSG_RDMA_ADDR=" << addr << ": no address or no active RDMA device";
    return nullptr;
  }
  auto loop = EventLoop::create();
  if (!loop) {
    ADD_FAILURE() << "EventLoop::create: " << loop.error().message();
    return nullptr;
  }
  return std::make_unique<RdmaTransport>(std::move(loop).value(), a.value());
}

}  // namespace

RMSG_INSTANTIATE_STREAM_CONTRACT(Rdma, make_rdma);

}  // namespace rmsg::testing
