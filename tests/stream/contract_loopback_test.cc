// The Stream contract on the test kit's in-memory loopback (kit/loopback.h).
#include <memory>

#include "kit/loopback.h"
#include "kit/stream_contract.h"

namespace rmsg::testing {
namespace {

class LoopbackTransport final : public ContractTransport {
 public:
  explicit LoopbackTransport(std::unique_ptr<EventLoop> loop) : loop_(std::move(loop)) {}
  EventLoop& loop() override { return *loop_; }
  std::pair<Stream, Stream> connect_pair() override {
    LoopbackOptions o;
    o.buffer_size = 48 * 1024;
    return loopback_pair(*loop_, o, o);
  }

 private:
  std::unique_ptr<EventLoop> loop_;
};

std::unique_ptr<ContractTransport> make_loopback() {
  auto loop = EventLoop::create();
  if (!loop) {
    ADD_FAILURE() << "EventLoop::create: " << loop.error().message();
    return nullptr;
  }
  return std::make_unique<LoopbackTransport>(std::move(loop).value());
}

}  // namespace

RMSG_INSTANTIATE_STREAM_CONTRACT(Loopback, make_loopback);

}  // namespace rmsg::testing
