// The upgrade engine's acceptor side (docs/socket-shim.md, "The RDMA upgrade"; the records
// in docs/protocol.md, "Socket shim upgrade"): an rdma_cm listener beside each managed TCP
// listener, the connector's OFFER matched to an accepted TCP connection by its 4-tuple,
// and the nonce that binds the two. Runs on the engine's loop thread.
#include <sys/random.h>
#include <sys/socket.h>

#include <cstring>
#include <future>
#include <iterator>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "posix/upgrade.h"
#include "posix/upgrade_engine.h"
#include "rdma/rdma_connect.h"
#include "rmsg/address.h"

namespace rmsg::posix {

namespace upg {
namespace {

void refuse(Stream& s, wire::Status why) {
  wire::Challenge ch;
  ch.status = why;
  std::uint8_t buf[wire::kChallengeSize];
  wire::encode(ch, std::span<std::uint8_t, wire::kChallengeSize>(buf));
  (void)s.write(buf, sizeof buf);
  (void)s.shutdown_write();
  s.close();
}

}  // namespace

// The acceptor at the cut-over offset looks for the nonce itself, so that a program that
// does not read (iperf3's sender, say) still cuts over. There is no deadline: the
// connector may have written the nonce already, and refusing then would hand its bytes to
// the program as data. A forger's request is refused when the TCP peer's next bytes are
// not the nonce, or at end of stream; until then the cap stops nothing that exists.
void verify_at_cap(UpgradeConn* c) {
  if (c->verify_watch != WatchId{} || !c->stream) return;
  auto w = engine()->loop->watch(c->tcp_fd, kReadable, [c](std::uint32_t) {
    int v = 0;
    {
      std::lock_guard lock(c->mu);
      v = c->verify_nonce ? nonce_verdict(*c) : 2;
    }
    if (v == 0) return;  // not all there yet
    stop_verify_watch(*c);
    if (v == 1) hold_writes(*c);
    if (v == -1) fail(*c, Fallback::binding);
  });
  if (w) c->verify_watch = w.value();
}

namespace {

void handle_offer(Stream s, const std::uint8_t* bytes) {
  UPG_DEBUG("upgrade: offer from %s\n", s.peer_address().c_str());
  auto offer =
      wire::decode_offer(std::span<const std::uint8_t, wire::kOfferSize>(bytes, wire::kOfferSize));
  if (!offer) {
    refuse(s, wire::Status::malformed);
    return;
  }
  UpgradeConn* c = nullptr;
  {
    std::lock_guard lock(engine()->map_mu);
    auto it = engine()->acceptors.find(Key{text(offer->peer), text(offer->local)});
    if (it != engine()->acceptors.end()) c = it->second;
  }
  auto rdma_peer = SocketAddress::parse(s.peer_address());
  if (c == nullptr || c->closing || !rdma_peer || rdma_peer.value().host() != host_of(c->peer)) {
    refuse(s, wire::Status::address);
    return;
  }
  std::unique_lock lock(c->mu);
  // A read inside the kernel's call computed its limit without this cap: it may take the
  // nonce as data.
  if (c->challenged || c->stream || c->read_rdma || c->tcp_in > offer->offset ||
      c->tcp_readers > 0) {
    lock.unlock();
    refuse(s, wire::Status::busy);
    return;
  }
  wire::Challenge ch;
  if (getrandom(ch.nonce.data(), ch.nonce.size(), 0) != static_cast<ssize_t>(ch.nonce.size())) {
    lock.unlock();
    refuse(s, wire::Status::busy);
    return;
  }
  c->nonce = ch.nonce;
  c->read_cap = offer->offset;
  c->verify_nonce = true;
  c->challenged = true;
  signal_readers(*c);
  lock.unlock();
  c->stream = std::move(s);
  std::uint8_t buf[wire::kChallengeSize];
  wire::encode(ch, std::span<std::uint8_t, wire::kChallengeSize>(buf));
  if (!write_all(c->stream, buf, sizeof buf)) {
    fail(*c, Fallback::binding);
    return;
  }
  c->stream.on_readable([c] { on_stream_readable(*c); });
  bool at_cap = false;
  {
    std::lock_guard l(c->mu);
    at_cap = c->tcp_in == c->read_cap;
  }
  if (at_cap) verify_at_cap(c);
}

void on_accept(Stream s) {
  auto& offers = engine()->offers;
  offers.push_back(std::move(s));
  auto it = std::prev(offers.end());
  auto got = std::make_shared<std::string>();
  it->on_readable([it, got] {
    char buf[wire::kOfferSize];
    auto r = it->read(buf, wire::kOfferSize - got->size());
    if (!r && r.error() == Errc::would_block) return;
    if (!r || r.value() == 0) {
      auto dead = it;  // this callback belongs to the stream it destroys: captures first
      dead->close();
      engine()->offers.erase(dead);
      return;
    }
    got->append(buf, r.value());
    if (got->size() < wire::kOfferSize) return;
    std::string offer = *got;
    auto done = it;
    Stream mine = std::move(*done);
    engine()->offers.erase(done);
    mine.on_readable({});  // destroys this callback: only locals from here on
    handle_offer(std::move(mine), reinterpret_cast<const std::uint8_t*>(offer.data()));
  });
}

}  // namespace
}  // namespace upg

using namespace upg;  // NOLINT(google-build-using-namespace): the engine's own parts

void upgrade_listening(int fd, SocketObject& /*o*/) {
  Engine* e = engine();
  if (!engine_on(e)) return;
  sockaddr_in6 a{};
  socklen_t len = sizeof a;
  if (g_engine_real->getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return;
  auto addr = SocketAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&a), len);
  addr.set_port(static_cast<std::uint16_t>(addr.port() + e->port_offset));
  // Synchronous: a connector that the program lets connect once listen() returned must
  // find the rdma_cm listener there.
  std::promise<void> up;
  e->loop->post([e, addr, &up] {
    rdma::ResourceHooks hooks = rdma::default_resource_hooks(*e->loop);
    hooks.admit = [e] { return std::optional<Lease>(e->streams.take()); };
    auto l = rdma::listen_with(*e->loop, addr, options(), std::move(hooks),
                               [](Stream s) { on_accept(std::move(s)); });
    if (l) {
      e->listeners.push_back(std::move(l.value()));
    } else {
      UPG_DEBUG("upgrade: rdma listen on %s: %s\n", addr.to_string().c_str(),
                l.error().message().c_str());
    }
    up.set_value();
  });
  up.get_future().wait();
}

}  // namespace rmsg::posix
