// Relaying a connection to the shard that owns its peer (docs/messenger.md, Threading:
// RDMA connectors without affinity). An RDMA connect request without the affinity that
// routes it lands on loop 0; its stream cannot move to another loop (its CQs, channels and
// timers are loop 0's). Once its hello names another shard's peer, loop 0 keeps the stream
// behind a RelayPump and hands the owner a RelayStream: the owner runs the whole handshake
// again from byte 0 over the bytes loop 0 read (replayed first), so one session exists,
// on the owner, checked there as any other. Loop 0 already sent its banner; the owner's
// (the same bytes) is skipped.
#include <algorithm>
#include <memory>
#include <utility>

#include "msg/messenger_impl.h"
#include "msg/relay_stream.h"
#include "msg/vocabulary.h"
#include "rmsg/log.h"
#include "wire/banner.h"

namespace rmsg {

void Messenger::Impl::keep_transcript(ConnId id, std::span<const std::byte> in) {
  Connection* c = find_connection(id);
  if (c == nullptr || c->role != Connection::Role::inbound || c->peer != 0 ||
      c->state() != Connection::State::handshake) {
    return;
  }
  // Past what a relay holds it is not kept whole: relay() then refuses.
  const std::size_t cap = msg::kRelayCapacity + 1;
  const std::size_t keep = std::min(in.size(), cap - std::min(cap, c->transcript.size()));
  c->transcript.insert(c->transcript.end(), in.begin(),
                       in.begin() + static_cast<std::ptrdiff_t>(keep));
}

bool Messenger::Impl::relay(Connection& c, NodeId peer) {
  // With keys our banner is not Banner{}'s, which the owner's relayed stream skips; such a
  // connector names its node in its banner, so it is routed before it gets here.
  if (!owner_loop_ || !to_owner_ || shutting_down_ || keys_) return false;
  if (c.transcript.size() > msg::kRelayCapacity) return false;
  EventLoop& owner = owner_loop_(peer);
  auto channel = std::make_shared<msg::RelayChannel>(loop_, owner, msg::kRelayCapacity);
  if (channel->push(msg::RelayChannel::kNear, c.transcript) != c.transcript.size()) return false;
  msg::RelayEnds ends{c.stream.transport(), c.stream.local_address(), c.stream.peer_address()};
  const std::size_t skip = msg::encode_banner(msg::Banner{}).size();
  Stream far(std::make_unique<msg::RelayStream>(owner, channel, std::move(ends), skip));
  std::vector<std::byte> pending(c.unwritten().begin(), c.unwritten().end());
  Stream real = std::move(c.stream);
  const ConnId id = c.id;
  const Transport transport = c.transport;
  drop(id, false);  // its stream moved out: timers and handshake slot only
  const std::uint64_t key = next_relay_++;
  std::weak_ptr<Impl> weak = weak_from_this();
  relays_.emplace(key, std::make_unique<msg::RelayPump>(std::move(real), std::move(channel),
                                                        std::move(pending), [weak, key] {
                                                          if (auto self = weak.lock())
                                                            self->relays_.erase(key);
                                                        }));
  counters_.counter("msg.accepts.relayed").add_owned();
  RMSG_LOG(debug, "msg: node %llx: connection %llu: hello from %llx relayed to its owner",
           static_cast<unsigned long long>(options_.node_id), static_cast<unsigned long long>(id),
           static_cast<unsigned long long>(peer));
  to_owner_(peer, std::move(far), transport);
  return true;
}

}  // namespace rmsg
