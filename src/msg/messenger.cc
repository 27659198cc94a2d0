// The public Messenger: argument checks and forwarding to the Impl; the error category.
// The ConnectionManager as the default source of streams: manager_streams.cc.
#include "rmsg/messenger.h"

#include <atomic>
#include <limits>
#include <utility>

#include "base/retry_rules.h"
#include "loop/loop_thread.h"
#include "msg/messenger_front.h"
#include "msg/messenger_impl.h"
#include "msg/seams.h"
#include "rmsg/log.h"
#include "rmsg/rdma.h"

namespace rmsg {
namespace {

class MessengerCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "rmsg.messenger"; }
  std::string message(int ev) const override {
    switch (static_cast<MessengerErrc>(ev)) {
      case MessengerErrc::peer_restarted:
        return "peer restarted its session";
      case MessengerErrc::session_unknown:
        return "peer does not know our session";
      case MessengerErrc::lossy_fault:
        return "lossy session lost its connection";
      case MessengerErrc::wrong_node:
        return "wrong node at that address";
      case MessengerErrc::handshake_timeout:
        return "handshake timed out";
      case MessengerErrc::unexpected_frame:
        return "unexpected frame";
      case MessengerErrc::sequence_gap:
        return "message sequence gap";
      case MessengerErrc::bad_ack:
        return "ack of a message never sent";
      case MessengerErrc::bad_payload:
        return "malformed control payload";
      case MessengerErrc::replaced:
        return "connection replaced";
      case MessengerErrc::peer_closed:
        return "peer closed the connection";
      case MessengerErrc::shutdown:
        return "messenger shut down";
      case MessengerErrc::idle_timeout:
        return "nothing received for idle_timeout";
      case MessengerErrc::bad_fragment:
        return "malformed fragment sequence";
      case MessengerErrc::session_expired:
        return "session expired (no connection for session_expiry, or evicted)";
      case MessengerErrc::not_reading:
        return "peer does not read our answers";
      case MessengerErrc::duplicate_node:
        return "node id in use by a healthy session";
    }
    return "unknown messenger error";
  }
};

ErrorKind messenger_kind(int code) noexcept {
  switch (static_cast<MessengerErrc>(code)) {
    case MessengerErrc::peer_restarted:
    case MessengerErrc::session_unknown:
    case MessengerErrc::lossy_fault:
    case MessengerErrc::session_expired:
      return ErrorKind::session_reset;
    case MessengerErrc::wrong_node:
    case MessengerErrc::duplicate_node:
      return ErrorKind::rejected;
    case MessengerErrc::handshake_timeout:
      return ErrorKind::timeout;
    case MessengerErrc::unexpected_frame:
    case MessengerErrc::sequence_gap:
    case MessengerErrc::bad_ack:
    case MessengerErrc::bad_payload:
    case MessengerErrc::bad_fragment:
      return ErrorKind::protocol;
    case MessengerErrc::replaced:
    case MessengerErrc::peer_closed:
    case MessengerErrc::idle_timeout:
    case MessengerErrc::not_reading:
      return ErrorKind::connection_lost;
    case MessengerErrc::shutdown:
      return ErrorKind::shutting_down;
  }
  return ErrorKind::other;
}

}  // namespace

const std::error_category& messenger_category() noexcept {
  static const MessengerCategory category;
  // rmsg/messenger.h, MessengerErrc: the resets and a lost connection, not the rest.
  static const bool rule = register_retryable(
      category,
      retry_codes({MessengerErrc::peer_restarted, MessengerErrc::session_unknown,
                   MessengerErrc::lossy_fault, MessengerErrc::handshake_timeout,
                   MessengerErrc::replaced, MessengerErrc::peer_closed, MessengerErrc::idle_timeout,
                   MessengerErrc::session_expired, MessengerErrc::not_reading}),
      messenger_kind);
  static_cast<void>(rule);
  return category;
}

Result<std::unique_ptr<Messenger>> MessengerAccess::create(EventLoop& loop,
                                                           const MessengerOptions& options,
                                                           std::unique_ptr<StreamFactory> streams,
                                                           Messenger::DispatchCallback dispatch,
                                                           Messenger::EventCallback on_event) {
  if (!streams) return make_error_code(Errc::invalid_argument);
  auto given = std::make_shared<std::unique_ptr<StreamFactory>>(std::move(streams));
  EventLoop* const loops[] = {&loop};
  return create(
      loops, options,
      [given](EventLoop&) -> Result<std::unique_ptr<StreamFactory>> { return std::move(*given); },
      std::move(dispatch), std::move(on_event));
}

Result<std::unique_ptr<Messenger>> MessengerAccess::create(
    std::span<EventLoop* const> loops, const MessengerOptions& options,
    const Messenger::Front::MakeStreams& make_streams, Messenger::DispatchCallback dispatch,
    Messenger::EventCallback on_event) {
  auto front = Messenger::Front::create(loops, options, make_streams, std::move(dispatch),
                                        std::move(on_event));
  if (!front) return front.error();
  return Messenger::Front::wrap(std::move(front).value());
}

Messenger::Front& MessengerAccess::front(Messenger& m) noexcept {
  return Messenger::Front::of(m);
}

Result<std::unique_ptr<Messenger>> Messenger::create(EventLoop& loop,
                                                     const MessengerOptions& options,
                                                     DispatchCallback dispatch,
                                                     EventCallback on_event) {
  EventLoop* const loops[] = {&loop};
  return create(loops, options, std::move(dispatch), std::move(on_event));
}

Result<std::unique_ptr<Messenger>> Messenger::create(std::span<EventLoop* const> loops,
                                                     const MessengerOptions& options,
                                                     DispatchCallback dispatch,
                                                     EventCallback on_event) {
  return MessengerAccess::create(loops, options, manager_streams(options), std::move(dispatch),
                                 std::move(on_event));
}

Messenger::Messenger(std::unique_ptr<Front> front) : front_(std::move(front)) {}

Messenger::~Messenger() = default;

Result<std::string> Messenger::listen(const SocketAddress& address,
                                      const ConnectionParams& params) {
  RMSG_ASSERT_LOOP_THREAD(loop());
  return front_->listen(address, params);
}
Result<void> Messenger::add_peer(NodeId peer, const ConnectionParams& params) {
  if (peer == 0 || peer == node_id()) return make_error_code(Errc::invalid_argument);
  front_->run_on(front_->owner(peer), [peer, params](Impl& s, msg::ServiceTable&) {
    if (auto r = s.add_peer(peer, params); !r) {  // its checks ran above: a bug
      RMSG_LOG(error, "messenger: add_peer(%llu): %s", static_cast<unsigned long long>(peer),
               r.error().message().c_str());
    }
  });
  return {};
}
Result<void> Messenger::add_peer(NodeId peer, const PeerAddresses& addresses) {
  if (peer == 0 || peer == node_id()) return make_error_code(Errc::invalid_argument);
  front_->run_on(front_->owner(peer), [peer, addresses](Impl& s, msg::ServiceTable&) {
    if (auto r = s.add_peer(peer, addresses); !r) {  // its checks ran above: a bug
      RMSG_LOG(error, "messenger: add_peer(%llu): %s", static_cast<unsigned long long>(peer),
               r.error().message().c_str());
    }
  });
  return {};
}
void Messenger::set_policy(NodeId peer, SessionPolicy policy) {
  front_->run_on(front_->owner(peer),
                 [peer, policy](Impl& s, msg::ServiceTable&) { s.set_policy(peer, policy); });
}
Result<void> Messenger::send(NodeId peer, std::span<const std::byte> payload, ServiceId service) {
  return front_->send(peer, std::vector<std::byte>(payload.begin(), payload.end()), service);
}
Result<void> Messenger::send(NodeId peer, std::vector<std::byte> payload, ServiceId service) {
  return front_->send(peer, std::move(payload), service);
}
Result<void> Messenger::attach(ServiceId service, DispatchCallback dispatch,
                               EventCallback on_event) {
  return front_->attach(service, std::move(dispatch), std::move(on_event));
}
void Messenger::detach(ServiceId service) {
  front_->detach(service);
}
Result<Messenger::Ticket> Messenger::send_tracked(NodeId peer, std::vector<std::byte> payload,
                                                  ServiceId service) {
  RMSG_ASSERT_LOOP_THREAD(loop_of(peer));
  return front_->shard_of(peer).impl->send_tracked(peer, std::move(payload),
                                                   SendOptions{.service = service});
}
Result<Messenger::Ticket> Messenger::send_tracked(NodeId peer, std::vector<std::byte> payload,
                                                  const SendOptions& options) {
  RMSG_ASSERT_LOOP_THREAD(loop_of(peer));
  return front_->shard_of(peer).impl->send_tracked(peer, std::move(payload), options);
}
Result<void> Messenger::send(NodeId peer, std::vector<std::byte> payload,
                             const SendOptions& options) {
  return front_->send(peer, std::move(payload), options);
}
bool Messenger::withdraw(NodeId peer, Ticket ticket) {
  RMSG_ASSERT_LOOP_THREAD(loop_of(peer));
  return front_->shard_of(peer).impl->withdraw(peer, ticket);
}
void Messenger::shutdown(Clock::time_point deadline, std::function<void()> done) {
  front_->drain(deadline, std::move(done));
}
void Messenger::mark_down(NodeId peer) {
  front_->run_on(front_->owner(peer), [peer](Impl& s, msg::ServiceTable&) { s.mark_down(peer); });
}
std::optional<Messenger::SessionInfo> Messenger::session_info(NodeId peer) const {
  RMSG_ASSERT_LOOP_THREAD(loop_of(peer));
  return front_->shard_of(peer).impl->session_info(peer);
}
NodeId Messenger::node_id() const noexcept {
  return front_->options_.node_id;
}
const MessengerOptions& Messenger::options() const noexcept {
  return front_->options_;
}
EventLoop& Messenger::loop() const noexcept {
  return *front_->shards_[0].loop;
}
std::size_t Messenger::loop_count() const noexcept {
  return front_->shards_.size();
}
EventLoop& Messenger::loop_of(NodeId peer) const noexcept {
  return *front_->shard_of(peer).loop;
}
const CounterSet& Messenger::counters() const noexcept {
  return front_->shards_[0].impl->counters();
}
const CounterSet& Messenger::counters(std::size_t loop_index) const noexcept {
  return front_->shards_[loop_index].impl->counters();
}
std::uint64_t Messenger::counter_total(const std::string& name) const {
  std::uint64_t sum = 0;
  for (const auto& s : front_->shards_) {
    const auto snap = s.impl->counters().snapshot();
    if (auto it = snap.find(name); it != snap.end()) sum += it->second;
  }
  return sum;
}

namespace {
std::atomic<bool (*)()> device_probe{nullptr};  // MessengerAccess::set_device_probe
bool device_available() {
  bool (*probe)() = device_probe.load(std::memory_order_acquire);
  return probe != nullptr ? probe() : rdma_device_available();
}
}  // namespace

void MessengerAccess::set_device_probe(bool (*probe)()) noexcept {
  device_probe.store(probe, std::memory_order_release);
}

// listen() and add_peer() without a transport: RDMA where a local device has an active
// port, TCP always. The look at the devices is the bounded probe: it reads the device list
// and port states, sends nothing and waits for nobody, so a host without RDMA goes to TCP at
// once instead of trying a connect that cannot work. With a device, the session's policy is
// rdma_preferred: an RDMA connect that fails (the peer has no device, or listens on TCP only)
// is followed at once by a TCP one (docs/messenger.md, Failover).
Result<std::string> Messenger::listen(const SocketAddress& address) {
  ConnectionParams tcp;
  tcp.transport = Transport::tcp;
  auto bound = listen(address, tcp);
  if (!bound || !device_available()) return bound;
  // The same port on RDMA (its own port space), so one address serves both.
  auto same = SocketAddress::parse(bound.value());
  if (!same) return bound;
  ConnectionParams rdma;
  rdma.transport = Transport::rdma;
  if (auto r = listen(same.value(), rdma); !r) {
    RMSG_LOG(warn, "messenger: listen %s: RDMA: %s (TCP only)", bound.value().c_str(),
             r.error().message().c_str());
  }
  return bound;
}

Result<void> Messenger::add_peer(NodeId peer, const SocketAddress& address) {
  PeerAddresses a;
  a.rdma.peer = address;
  a.tcp.peer = address;
  a.policy = device_available() ? TransportPolicy::rdma_preferred : TransportPolicy::tcp_only;
  return add_peer(peer, a);
}

}  // namespace rmsg
