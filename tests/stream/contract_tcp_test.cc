// The Stream contract on TCP over 127.0.0.1, with small socket buffers so that a writer
// meets would_block early.
#include <chrono>
#include <deque>
#include <memory>
#include <optional>

#include "kit/stream_contract.h"
#include "rmsg/tcp.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;

class TcpTransport final : public ContractTransport {
 public:
  explicit TcpTransport(std::unique_ptr<EventLoop> loop) : loop_(std::move(loop)) {
    options_.send_buffer = 64 * 1024;
    options_.recv_buffer = 64 * 1024;
  }
  EventLoop& loop() override { return *loop_; }

  std::pair<Stream, Stream> connect_pair() override {
    const auto any = SocketAddress::from_host_port("127.0.0.1", 0).value();
    if (!listener_.valid()) {
      auto l = tcp_listen(*loop_, any, options_,
                          [this](Stream s) { accepted_.push_back(std::move(s)); });
      if (!l) {
        ADD_FAILURE() << "tcp_listen: " << l.error().message();
        return {};
      }
      listener_ = std::move(l).value();
    }
    std::optional<Result<Stream>> client;
    tcp_connect(*loop_, SocketAddress::from_host_port("127.0.0.1", listener_.port()).value(),
                options_, [&](Result<Stream> r) { client.emplace(std::move(r)); });
    if (!loop_->run_for([&] { return client && !accepted_.empty(); }, 10s) || !client->ok()) {
      ADD_FAILURE() << "tcp connect: " << (client ? client->error().message() : "pending");
      return {};
    }
    Stream server = std::move(accepted_.front());
    accepted_.pop_front();
    return {std::move(*client).value(), std::move(server)};
  }

 private:
  std::unique_ptr<EventLoop> loop_;
  TcpOptions options_;
  Listener listener_;
  std::deque<Stream> accepted_;
};

std::unique_ptr<ContractTransport> make_tcp() {
  auto loop = EventLoop::create();
  if (!loop) {
    ADD_FAILURE() << "EventLoop::create: " << loop.error().message();
    return nullptr;
  }
  return std::make_unique<TcpTransport>(std::move(loop).value());
}

}  // namespace

RMSG_INSTANTIATE_STREAM_CONTRACT(Tcp, make_tcp);

}  // namespace rmsg::testing
