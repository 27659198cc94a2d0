#include "stream_runner.h"

#include <atomic>
#include <future>
#include <optional>
#include <thread>

#include "stream_client.h"
#include "stream_server.h"

namespace rmsg::perf {
namespace {

EventLoopOptions loop_options(const RunOptions& o) {
  EventLoopOptions lo;
  if (o.poll_spin_us >= 0) lo.poll_spin = std::chrono::microseconds(o.poll_spin_us);
  return lo;
}

using namespace std::chrono_literals;

constexpr auto kConnectLimit = 30s;

// A listener plus its sessions on an existing loop.
class LoopServer final : public Server {
 public:
  explicit LoopServer(EventLoop& loop) : server_(loop) {}
  Result<void> listen(const StreamTransport& t, EventLoop& loop, const SocketAddress& address,
                      const RunOptions& options) {
    auto l = t.listen(loop, address, options, [this](Stream s) { server_.accept(std::move(s)); });
    if (!l) return l.error();
    listener_ = std::move(l).value();
    return {};
  }
  std::uint16_t port() const override { return listener_.port(); }

 private:
  StreamServer server_;
  Listener listener_;
};

// A LoopServer on a thread of its own, with its own loop.
class ThreadServer final : public Server {
 public:
  ThreadServer() = default;
  ThreadServer(const ThreadServer&) = delete;
  ThreadServer& operator=(const ThreadServer&) = delete;
  ThreadServer(ThreadServer&&) = delete;
  ThreadServer& operator=(ThreadServer&&) = delete;
  ~ThreadServer() override {
    if (!thread_.joinable()) return;
    stop_.store(true);
    // stop() from inside the loop: a stop() from here could come before run() starts,
    // and run() would forget it.
    loop_->post([l = loop_] { l->stop(); });
    thread_.join();
  }

  Result<void> start(const StreamTransport& t, const SocketAddress& address,
                     const RunOptions& options) {
    std::promise<Result<std::uint16_t>> ready;
    auto ready_future = ready.get_future();
    thread_ = std::thread([&, address, options] {
      pin_server_thread(options);
      auto loop = EventLoop::create(loop_options(options));
      if (!loop) return ready.set_value(loop.error());
      (*loop)->set_busy_poll(options.busy_poll);
      LoopServer server(**loop);
      if (auto r = server.listen(t, **loop, address, options); !r) {
        return ready.set_value(r.error());
      }
      loop_ = loop->get();
      ready.set_value(server.port());  // `ready` and `t` are not touched after this
      // run(), not run_until(): no timeout on each epoll_wait (see stream_client.cc).
      // The loop (and loop_) must outlive every post() from the destructor.
      while (!stop_.load()) static_cast<void>(loop_->run());
    });
    auto port = ready_future.get();
    if (!port) {
      thread_.join();
      return port.error();
    }
    port_ = *port;
    return {};
  }

  std::uint16_t port() const override { return port_; }

 private:
  std::thread thread_;
  EventLoop* loop_ = nullptr;  // owned by the thread; valid until it is joined
  std::atomic<bool> stop_{false};
  std::uint16_t port_ = 0;
};

class StreamRunner final : public Runner {
 public:
  StreamRunner(const StreamTransport& t, const RunOptions& o, std::unique_ptr<EventLoop> loop)
      : t_(t), options_(o), loop_(std::move(loop)) {
    loop_->set_busy_poll(o.busy_poll);
  }

  std::string name() const override { return t_.name; }

  Result<std::unique_ptr<Server>> start_server(const SocketAddress& address) override {
    if (options_.one_thread) {
      auto s = std::make_unique<LoopServer>(*loop_);
      RMSG_TRY(s->listen(t_, *loop_, address, options_));
      return std::unique_ptr<Server>(std::move(s));
    }
    auto s = std::make_unique<ThreadServer>();
    RMSG_TRY(s->start(t_, address, options_));
    return std::unique_ptr<Server>(std::move(s));
  }

  Result<Measurement> run(const SocketAddress& address, const Spec& spec,
                          Progress& progress) override {
    std::optional<Result<Stream>> connected;
    t_.connect(*loop_, address, options_,
               [&](Result<Stream> r) { connected.emplace(std::move(r)); });
    if (!loop_->run_for([&] { return connected.has_value(); }, kConnectLimit)) {
      return Errc::timeout;
    }
    if (!connected->ok()) return connected->error();
    Stream stream = std::move(*connected).value();
    auto m = run_stream_client(stream, spec, progress);
    if (options_.counters && t_.print_counters) t_.print_counters(stream);
    return m;
  }

 private:
  const StreamTransport& t_;
  RunOptions options_;
  std::unique_ptr<EventLoop> loop_;
};

}  // namespace

Result<std::unique_ptr<Runner>> make_stream_runner(const StreamTransport& transport,
                                                   const RunOptions& options) {
  auto loop = EventLoop::create(loop_options(options));
  if (!loop) return loop.error();
  return std::unique_ptr<Runner>(
      std::make_unique<StreamRunner>(transport, options, std::move(loop).value()));
}

}  // namespace rmsg::perf
