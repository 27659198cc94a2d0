// Loopback connection setup (kit/loopback.h): listeners by name and port in a per-loop
// registry, connects, pairs, and the fault injector's bookkeeping.
#include <cerrno>
#include <map>
#include <utility>

#include "loopback_stream.h"
#include "rmsg/testing/loopback.h"

namespace rmsg::testing {
namespace {

class LoopbackListener;

// The loop's listeners (an EventLoop service: one registry per loop).
struct Registry {
  std::map<std::pair<std::string, std::uint16_t>, LoopbackListener*> listeners;
  std::uint16_t next_port = 1;
  std::uint16_t next_ephemeral = 49152;
};
const char kRegistryKey = 0;

std::shared_ptr<Registry> registry(EventLoop& loop) {
  auto s = loop.service(&kRegistryKey);
  if (!s) {
    s = std::make_shared<Registry>();
    loop.set_service(&kRegistryKey, s);
  }
  return std::static_pointer_cast<Registry>(s);
}

class LoopbackListener final : public ListenerImpl {
 public:
  LoopbackListener(std::shared_ptr<Registry> reg, std::string name, std::uint16_t port,
                   LoopbackOptions options, AcceptCallback on_accept)
      : reg_(std::move(reg)),
        name_(std::move(name)),
        port_(port),
        options_(std::move(options)),
        on_accept_(std::move(on_accept)) {
    reg_->listeners[{name_, port_}] = this;
  }
  LoopbackListener(const LoopbackListener&) = delete;
  LoopbackListener& operator=(const LoopbackListener&) = delete;
  LoopbackListener(LoopbackListener&&) = delete;
  LoopbackListener& operator=(LoopbackListener&&) = delete;
  ~LoopbackListener() override { close(); }

  std::string local_address() const override { return name_ + ":" + std::to_string(port_); }
  std::uint16_t port() const override { return port_; }
  void close() override {
    if (open_) reg_->listeners.erase({name_, port_});
    open_ = false;
  }
  const LoopbackOptions& options() const { return options_; }
  void accept(Stream s) {
    const AcceptCallback cb = on_accept_;  // it may close this listener
    cb(std::move(s));
  }

 private:
  std::shared_ptr<Registry> reg_;
  std::string name_;
  std::uint16_t port_;
  LoopbackOptions options_;
  AcceptCallback on_accept_;
  bool open_ = true;
};

std::pair<Stream, Stream> connect_ends(EventLoop& loop, const LoopbackOptions& a,
                                       std::string a_name, const LoopbackOptions& b,
                                       std::string b_name) {
  auto link = std::make_shared<LoopbackLink>(loop);
  link->pipe[0].capacity = a.buffer_size;
  link->pipe[1].capacity = b.buffer_size;
  Stream sa(std::make_unique<LoopbackStream>(link, 0, a.faults, a_name, b_name));
  Stream sb(
      std::make_unique<LoopbackStream>(link, 1, b.faults, std::move(b_name), std::move(a_name)));
  return {std::move(sa), std::move(sb)};
}

}  // namespace

Result<Listener> loopback_listen(EventLoop& loop, std::string_view name, std::uint16_t port,
                                 const LoopbackOptions& options, AcceptCallback on_accept) {
  if (name.empty()) return Errc::invalid_argument;
  auto reg = registry(loop);
  const std::string key(name);
  if (port == 0) {
    while (reg->listeners.count({key, reg->next_port}) != 0 || reg->next_port == 0)
      ++reg->next_port;
    port = reg->next_port++;
  } else if (reg->listeners.count({key, port}) != 0) {
    return errno_code(EADDRINUSE);
  }
  return Listener(
      std::make_unique<LoopbackListener>(std::move(reg), key, port, options, std::move(on_accept)));
}

void loopback_connect(EventLoop& loop, std::string_view name, std::uint16_t port,
                      const LoopbackOptions& options, ConnectCallback done) {
  loop.defer([&loop, name = std::string(name), port, options, done = std::move(done)] {
    if (options.faults) {
      if (auto ec = options.faults->take_connect_failure()) return done(ec);
    }
    auto reg = registry(loop);
    auto it = reg->listeners.find({name, port});
    if (it == reg->listeners.end()) return done(make_error_code(Errc::connection_refused));
    LoopbackListener* listener = it->second;
    if (reg->next_ephemeral == 0) reg->next_ephemeral = 49152;
    const std::string local = options.local_name + ":" + std::to_string(reg->next_ephemeral++);
    auto [client, server] =
        connect_ends(loop, options, local, listener->options(), name + ":" + std::to_string(port));
    listener->accept(std::move(server));
    done(std::move(client));
  });
}

std::pair<Stream, Stream> loopback_pair(EventLoop& loop, const LoopbackOptions& a,
                                        const LoopbackOptions& b) {
  return connect_ends(loop, a, "a:1", b, "b:2");
}

void LoopbackFaults::fail_connects(std::error_code ec, int count) {
  connect_error_ = ec;
  connect_failures_ = ec ? count : 0;
}

std::error_code LoopbackFaults::take_connect_failure() {
  if (connect_failures_ <= 0) return {};
  --connect_failures_;
  return connect_error_;
}

void LoopbackFaults::fail_read(std::error_code ec, std::size_t after) {
  read_ = {ec, after};
  rearm_attached();
}

void LoopbackFaults::fail_write(std::error_code ec, std::size_t after) {
  write_ = {ec, after};
  rearm_attached();
}

void LoopbackFaults::delay(Duration d) {
  delay_ = d;
}

void LoopbackFaults::reset() {
  const auto attached = attached_;  // peer_failed only defers, but stay safe
  for (const auto& [weak, side] : attached) {
    if (auto link = weak.lock()) {
      for (auto* end : link->end) {
        if (end != nullptr) end->peer_failed(make_error_code(Errc::connection_reset));
      }
    }
  }
}

void LoopbackFaults::attach(const std::shared_ptr<LoopbackLink>& link, int side) {
  std::erase_if(attached_, [](const auto& a) { return a.first.expired(); });
  attached_.emplace_back(link, side);
}

void LoopbackFaults::rearm_attached() {
  for (const auto& [weak, side] : attached_) {
    if (auto link = weak.lock()) {
      if (auto* end = link->end[side]) end->schedule_notify();
    }
  }
}

}  // namespace rmsg::testing
