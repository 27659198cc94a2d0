// The upgrade engine's loop side (docs/socket-shim.md, "The RDMA upgrade"; the records in
// docs/protocol.md, "Socket shim upgrade"): one EventLoop on a thread of its own, the
// connector's bounded attempt, the cut-over, the flushing of program bytes into the RDMA
// stream, the hooks the shim's core calls, and exit. The acceptor's side is
// upgrade_acceptor.cc. Linking this file installs the engine (g_upgrade_hooks);
// RMSG_UPGRADE=on turns it on for the process.
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <future>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <system_error>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "base/lease.h"
#include "posix/upgrade.h"
#include "posix/upgrade_conn.h"
#include "posix/upgrade_engine.h"
#include "posix/upgrade_wire.h"
#include "rdma/rdma_connect.h"
#include "rmsg/address.h"
#include "rmsg/event_loop.h"
#include "rmsg/log.h"
#include "rmsg/rdma.h"

namespace rmsg::posix {

namespace upg {

using Clock = std::chrono::steady_clock;

std::string text(const sockaddr_in6& a) {
  return SocketAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(&a), sizeof a).to_string();
}

std::string host_of(const sockaddr_in6& a) {
  return SocketAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(&a), sizeof a).host();
}

// How long exit() waits for the peers to acknowledge the last bytes, and how long a
// closed connection's stream may wait for a peer that does not read (then it resets).
constexpr std::chrono::seconds kExitWait{10};
constexpr std::chrono::seconds kLingerTimeout{60};

void at_exit();

Engine* engine() {
  static Engine* e = [] {
    auto* en = new Engine;  // lives as long as the process: its thread may run at exit
    const char* v = std::getenv("RMSG_UPGRADE");
    en->on = v != nullptr && std::strcmp(v, "on") == 0;
    if (const char* o = std::getenv("RMSG_UPGRADE_PORT_OFFSET")) {
      en->port_offset = static_cast<std::uint16_t>(std::atoi(o));
    }
    if (const char* t = std::getenv("RMSG_UPGRADE_TIMEOUT_MS")) {
      en->timeout = std::chrono::milliseconds(std::atoi(t));
    }
    if (!en->on) return en;
    // The transport's own reasons (a CM reject, a failed setup) beside the engine's steps.
    if (std::getenv("RMSG_UPGRADE_DEBUG")) {
      set_log_handler(
          [](LogLevel l, std::string_view m) {
            timespec t{};
            clock_gettime(CLOCK_MONOTONIC, &t);
            std::fprintf(stderr, "%ld.%03ld rmsg %s: %.*s\n", static_cast<long>(t.tv_sec),
                         t.tv_nsec / 1000000, to_string(l), static_cast<int>(m.size()), m.data());
          },
          LogLevel::debug);
    }
    auto loop = EventLoop::create();
    if (!loop) {
      en->on = false;
      return en;
    }
    en->loop = std::move(loop.value());
    en->pid = getpid();
    en->thread = std::thread([l = en->loop.get()] { (void)l->run(); });
    // The loop thread runs until at_exit() stops it, after the statics made before this
    // registration are destroyed: the error categories it compares against must be made
    // first (a static made later is destroyed before at_exit() runs).
    (void)rmsg::error_category();
    (void)std::generic_category();
    (void)std::system_category();
    std::atexit(at_exit);
    return en;
  }();
  return e;
}

RdmaOptions options() {
  RdmaOptions o;
  o.retry_count = 6;  // bounded on rxe (rmsg/rdma.h)
  // 4.096 us * 2^17 = 537 ms per ACK timeout, 7 tries: a peer silent for up to ~3.8 s
  // (a starved host, a link that drops for a second) is outlasted, as TCP outlasts it;
  // the default 67 ms (0.47 s in all) failed starved guest pairs with RETRY_EXC_ERR.
  o.ack_timeout = 17;
  o.resolve_timeout = engine()->timeout / 2;
  o.connect_timeout = engine()->timeout / 2;
  o.linger_timeout = kLingerTimeout;
  return o;
}

bool loopback(const sockaddr_in6& a) {
  if (a.sin6_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    return (ntohl(v4.sin_addr.s_addr) >> 24) == 127;
  }
  return IN6_IS_ADDR_LOOPBACK(&a.sin6_addr) ||
         (IN6_IS_ADDR_V4MAPPED(&a.sin6_addr) && a.sin6_addr.s6_addr[12] == 127);
}

void set_result(UpgradeConn& c, Fallback f) {
  UPG_DEBUG("upgrade %p %s result %d\n", static_cast<void*>(&c),
            c.acceptor ? "acceptor" : "connector", static_cast<int>(f));
  c.result = f;
  if (c.obj != nullptr) c.obj->fallback.store(f, std::memory_order_relaxed);
}

void stop_nonce_watch(UpgradeConn& c) {
  if (c.nonce_watch != WatchId{}) engine()->loop->unwatch(std::exchange(c.nonce_watch, WatchId{}));
}

void stop_verify_watch(UpgradeConn& c) {
  if (c.verify_watch != WatchId{}) {
    engine()->loop->unwatch(std::exchange(c.verify_watch, WatchId{}));
  }
}

void free_conn(UpgradeConn* c) {
  if (c->closing) {
    std::lock_guard lock(engine()->drain_mu);
    --engine()->draining;
    engine()->drained.notify_all();
  }
  {
    std::lock_guard lock(engine()->map_mu);
    engine()->conns.erase(c);
    if (c->acceptor) {
      auto it = engine()->acceptors.find(Key{text(c->local), text(c->peer)});
      if (it != engine()->acceptors.end() && it->second == c) engine()->acceptors.erase(it);
    }
  }
  stop_verify_watch(*c);
  stop_nonce_watch(*c);
  c->stream.on_readable({});
  c->stream.on_writable({});
  c->stream = Stream();
  g_engine_real->close(c->tcp_fd);
  g_engine_real->close(c->event_fd);
  g_engine_real->close(c->room_fd);
  // One exit() closed while the program held it: another program thread may still be
  // inside a data call on it. One the program closed itself is freed (a leak checker at
  // exit would report it otherwise).
  if (!c->held_at_exit) delete c;
}

// The attempt failed before both directions cut over: the connection is exact TCP again.
void fail(UpgradeConn& c, Fallback why) {
  {
    std::lock_guard lock(c.mu);
    set_result(c, why);
    if (c.wmode == WriteMode::hold) c.wmode = WriteMode::tcp;
    signal_room(c);
    c.hold_waiting = false;
    if (!c.read_rdma) c.read_cap = kNoCap;
    c.verify_nonce = false;
    signal_readers(c);
  }
  stop_nonce_watch(c);
  stop_verify_watch(c);
  c.stream.on_readable({});
  c.stream.on_writable({});
  c.stream.close();
  c.stream = Stream();
  if (c.closing) free_conn(&c);
}

void cut_over_done(UpgradeConn& c) {
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - c.started);
  set_result(c, Fallback::none);
  if (c.obj != nullptr) {
    c.obj->upgrade_us.store(static_cast<std::uint64_t>(us.count()) + 1, std::memory_order_relaxed);
  }
}

void flush(UpgradeConn& c);

// Bytes the stream delivered: records first (by role), then program data into rx.
void on_stream_readable(UpgradeConn& c);

bool write_all(Stream& s, const std::uint8_t* p, std::size_t n) {
  auto r = s.write(p, n);
  return r && r.value() == n;  // a fresh stream has credits for a record
}

void send_offer(UpgradeConn& c) {
  wire::Offer o;
  {
    std::lock_guard lock(c.mu);
    o.offset = c.tcp_out;
  }
  o.local = c.local;
  o.peer = c.peer;
  std::uint8_t buf[wire::kOfferSize];
  wire::encode(o, std::span<std::uint8_t, wire::kOfferSize>(buf));
  c.offered = true;
  UPG_DEBUG("upgrade %p offer at %llu\n", static_cast<void*>(&c),
            static_cast<unsigned long long>(o.offset));
  if (!write_all(c.stream, buf, sizeof buf)) fail(c, Fallback::peer);
}

void send_cutover(UpgradeConn& c) {
  std::uint8_t buf[wire::kCutoverSize];
  std::unique_lock lock(c.mu);
  wire::encode_cutover(c.tcp_out, std::span<std::uint8_t, wire::kCutoverSize>(buf));
  lock.unlock();
  if (!write_all(c.stream, buf, sizeof buf)) {
    fail(c, Fallback::binding);
    return;
  }
  lock.lock();
  c.wmode = WriteMode::rdma;
  cut_over_done(c);
  c.cv.notify_all();
  signal_room(c);
  bool pending = !c.tx.empty();
  lock.unlock();
  if (pending) flush(c);
}

// Both sides: the write side stopped at its offset once no program write is inside the
// kernel; then the connector offers, the acceptor cuts over.
void hold_writes(UpgradeConn& c) {
  std::unique_lock lock(c.mu);
  c.wmode = WriteMode::hold;
  if (c.tcp_writers > 0) {
    c.hold_waiting = true;
    return;
  }
  lock.unlock();
  if (c.acceptor) {
    send_cutover(c);
  } else {
    send_offer(c);
  }
}

// The connector writes the nonce into TCP at its offset: the proof that the RDMA peer is
// the TCP peer. Program writes are held meanwhile, so nothing can come between. A full
// send buffer (the acceptor's program has not read up to the offset yet) is waited for on
// the loop, without a deadline: the program's own write would have waited as long. Once
// one byte of it is in TCP there is no way back to plain TCP (the peer would read a piece
// of nonce as data); a TCP error ends the attempt (the program sees the error itself).
void write_nonce(UpgradeConn& c) {
  while (c.nonce_out < c.nonce.size()) {
    ssize_t w = g_engine_real->send(c.tcp_fd, c.nonce.data() + c.nonce_out,
                                    c.nonce.size() - c.nonce_out, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      c.nonce_out += static_cast<std::size_t>(w);
      continue;
    }
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      if (c.nonce_watch == WatchId{}) {
        auto id =
            engine()->loop->watch(c.tcp_fd, kWritable, [&c](std::uint32_t) { write_nonce(c); });
        if (id) {
          c.nonce_watch = id.value();
          return;
        }
      } else {
        return;
      }
    }
    stop_nonce_watch(c);
    fail(c, Fallback::timeout);
    return;
  }
  stop_nonce_watch(c);
  std::unique_lock lock(c.mu);
  c.wmode = WriteMode::rdma;
  c.cv.notify_all();
  signal_room(c);
  bool pending = !c.tx.empty();
  lock.unlock();
  if (pending) flush(c);
  on_stream_readable(c);  // a CUTOVER that came meanwhile
}

Fallback refusal(wire::Status s) {
  switch (s) {
    case wire::Status::version:
      return Fallback::version;
    case wire::Status::address:
      return Fallback::address;
    case wire::Status::busy:
      return Fallback::busy;
    case wire::Status::policy:
      return Fallback::policy;
    default:
      return Fallback::peer;
  }
}

// The connector's records: CHALLENGE, then CUTOVER. True when data may follow.
bool connector_records(UpgradeConn& c) {
  if (!c.challenged) {
    if (c.records.size() < wire::kChallengeSize) return false;
    auto ch = wire::decode_challenge(std::span<const std::uint8_t, wire::kChallengeSize>(
        reinterpret_cast<const std::uint8_t*>(c.records.data()), wire::kChallengeSize));
    c.records.erase(0, wire::kChallengeSize);
    if (!ch || ch->status != wire::Status::ok) {
      fail(c, ch ? refusal(ch->status) : Fallback::peer);
      return false;
    }
    c.challenged = true;
    c.nonce = ch->nonce;
    write_nonce(c);  // on to the CUTOVER once the nonce is in TCP
    return false;
  }
  if (c.nonce_out < c.nonce.size()) return false;
  if (!c.cutover_in) {
    if (c.records.size() < wire::kCutoverSize) return false;
    auto m = wire::decode_cutover(std::span<const std::uint8_t, wire::kCutoverSize>(
        reinterpret_cast<const std::uint8_t*>(c.records.data()), wire::kCutoverSize));
    c.records.erase(0, wire::kCutoverSize);
    if (!m) {
      // The nonce is in TCP already: the acceptor is an rmsg shim that broke the protocol.
      std::lock_guard lock(c.mu);
      c.rx_error = ECONNRESET;
      c.read_rdma = true;
      c.write_failed = true;
      signal_readers(c);
      return false;
    }
    c.cutover_in = true;
    std::lock_guard lock(c.mu);
    c.read_cap = *m;
    cut_over_done(c);
    c.rx.append(c.records);
    c.records.clear();
    signal_readers(c);
  }
  return true;
}

void on_stream_readable(UpgradeConn& c) {
  char buf[65536];
  for (;;) {
    if (!c.acceptor && !c.cutover_in) {
      auto r = c.stream.read(buf, sizeof buf);
      if (!r) {
        if (r.error() == Errc::would_block) return;
        if (!c.challenged) {
          fail(c, Fallback::peer);
        } else {
          std::lock_guard lock(c.mu);
          c.rx_error = ECONNRESET;
          c.read_rdma = true;
          signal_readers(c);
        }
        return;
      }
      if (r.value() == 0) {
        if (!c.challenged) fail(c, Fallback::peer);
        return;
      }
      c.records.append(buf, r.value());
      if (!connector_records(c)) return;
      continue;
    }
    std::unique_lock lock(c.mu);
    if (c.rx.size() >= kBufferCap) {
      c.rx_paused = true;
      return;
    }
    std::size_t room = std::min(sizeof buf, kBufferCap - c.rx.size());
    lock.unlock();
    auto r = c.stream.read(buf, room);
    lock.lock();
    if (!r) {
      if (r.error() == Errc::would_block) return;
      c.rx_error = ECONNRESET;
      c.write_failed = true;
    } else if (r.value() == 0) {
      c.rx_eof = true;
    } else {
      c.rx.append(buf, r.value());
    }
    if (c.read_rdma || !c.acceptor) signal_readers(c);
    if (!r || r.value() == 0) return;
  }
}

void flush(UpgradeConn& c) {
  std::unique_lock lock(c.mu);
  c.flush_posted = false;
  if (c.wmode != WriteMode::rdma || !c.stream) return;
  if (!c.tx.empty()) {
    auto r = c.stream.write(c.tx.data(), c.tx.size());
    if (!r && r.error() != Errc::would_block) {
      c.write_failed = true;
      c.tx.clear();
    } else if (r) {
      c.tx.erase(0, r.value());
    }
    c.cv.notify_all();
    if (c.tx.size() < kBufferCap || c.write_failed) signal_room(c);
  }
  if (!c.tx.empty()) {
    lock.unlock();
    c.stream.on_writable([&c] { flush(c); });
    return;
  }
  bool fin = c.shut_wr || c.closing;
  lock.unlock();
  if (fin) (void)c.stream.shutdown_write();
  if (c.closing) {
    c.stream.close();
    free_conn(&c);
  }
}

void start_connect(UpgradeConn* c) {
  auto peer =
      SocketAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(&c->peer), sizeof c->peer);
  peer.set_port(static_cast<std::uint16_t>(peer.port() + engine()->port_offset));
  rdma::connect_with(
      *engine()->loop, peer, options(), rdma::default_resource_hooks(*engine()->loop),
      engine()->streams.take(), [c](Result<Stream> r) {
        if (c->closing) {
          if (r) r.value().close();
          free_conn(c);
          return;
        }
        if (!r) {
          std::error_code e = r.error();
          UPG_DEBUG("upgrade %p rdma connect: %s\n", static_cast<void*>(c), e.message().c_str());
          Fallback why = Fallback::peer;
          if (e == Errc::timeout || e == Errc::unreachable || e == Errc::route_error)
            why = Fallback::timeout;
          if (e == std::errc::no_such_device || e == std::errc::address_not_available ||
              e == Errc::address_error) {
            why = Fallback::no_device;
          }
          fail(*c, why);
          return;
        }
        UPG_DEBUG("upgrade %p connected over rdma\n", static_cast<void*>(c));
        c->stream = std::move(r.value());
        c->stream.on_readable([c] { on_stream_readable(*c); });
        hold_writes(*c);
      });
}

bool engine_on(Engine* e) {
  return e->on && e->pid == getpid() && e->thread.joinable();
}

}  // namespace upg

using namespace upg;  // NOLINT(google-build-using-namespace): the engine's own parts

// ---- hooks ------------------------------------------------------------------------------

void post_flush(UpgradeConn& c) {
  engine()->loop->post([&c] {
    bool fallback_fin = false;
    {
      std::lock_guard lock(c.mu);
      // A FIN on TCP before the write side cut over ends the attempt (the nonce or
      // CUTOVER could no longer follow it).
      fallback_fin = !c.acceptor && c.shut_wr && !c.challenged && c.stream;
    }
    if (fallback_fin) {
      fail(c, Fallback::bypass);
      return;
    }
    flush(c);
  });
}

void post_writers_left(UpgradeConn& c) {
  c.hold_waiting = false;
  engine()->loop->post([&c] {
    std::unique_lock lock(c.mu);
    if (c.wmode != WriteMode::hold || c.tcp_writers > 0) return;
    lock.unlock();
    if (c.acceptor) {
      send_cutover(c);
    } else {
      send_offer(c);
    }
  });
}

void post_nonce_seen(UpgradeConn& c, bool match) {
  engine()->loop->post([&c, match] {
    if (!c.stream) return;
    stop_verify_watch(c);
    if (match) {
      hold_writes(c);
    } else {
      fail(c, Fallback::binding);
    }
  });
}

void post_at_cap(UpgradeConn& c) {
  engine()->loop->post([&c] { verify_at_cap(&c); });
}

void post_resume_reading(UpgradeConn& c) {
  engine()->loop->post([&c] {
    {
      std::lock_guard lock(c.mu);
      c.rx_paused = false;
    }
    if (c.stream) on_stream_readable(c);
  });
}

namespace {

// The engine's state for the connection at fd, published in o.upgrade; null (o.fallback
// says why) when it stays the kernel's alone. `connecting`: a non-blocking connect() is
// under way, the peer is the address the program gave (o.peer).
UpgradeConn* adopt_conn(int fd, SocketObject& o, bool acceptor, bool connecting) {
  Engine* e = engine();
  if (!engine_on(e)) {
    o.fallback.store(e->on ? Fallback::bypass : Fallback::policy, std::memory_order_relaxed);
    return nullptr;
  }
  auto* c = new UpgradeConn;
  c->acceptor = acceptor;
  c->started = Clock::now();
  socklen_t len = sizeof c->local;
  socklen_t plen = sizeof c->peer;
  if (connecting) c->peer = o.peer;
  if (g_engine_real->getsockname(fd, reinterpret_cast<sockaddr*>(&c->local), &len) != 0 ||
      (!connecting &&
       g_engine_real->getpeername(fd, reinterpret_cast<sockaddr*>(&c->peer), &plen) != 0) ||
      c->peer.sin6_family == 0) {
    delete c;
    o.fallback.store(Fallback::bypass, std::memory_order_relaxed);
    return nullptr;
  }
  if (loopback(c->peer)) {
    delete c;
    o.fallback.store(Fallback::loopback, std::memory_order_relaxed);
    return nullptr;
  }
  c->tcp_fd = g_engine_real->fcntl(fd, F_DUPFD_CLOEXEC, 100);
  c->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  c->room_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (c->tcp_fd < 0 || c->event_fd < 0 || c->room_fd < 0) {
    if (c->tcp_fd >= 0) g_engine_real->close(c->tcp_fd);
    if (c->event_fd >= 0) g_engine_real->close(c->event_fd);
    if (c->room_fd >= 0) g_engine_real->close(c->room_fd);
    delete c;
    o.fallback.store(Fallback::busy, std::memory_order_relaxed);
    return nullptr;
  }
  c->obj = &o;
  {
    std::lock_guard lock(e->map_mu);
    e->conns.insert(c);
  }
  // An acceptor whose peer never offers is a connection to a peer without the shim.
  o.fallback.store(acceptor ? Fallback::peer : Fallback::pending, std::memory_order_relaxed);
  c->result = acceptor ? Fallback::peer : Fallback::pending;
  if (acceptor) {
    std::lock_guard lock(e->map_mu);
    e->acceptors[Key{text(c->local), text(c->peer)}] = c;
  }
  o.upgrade.store(c, std::memory_order_release);
  return c;
}

// A non-blocking connect: the attempt starts once the kernel's connect completed (the
// socket writable and connected; getpeername, which leaves SO_ERROR to the program). One
// that failed stays as it is until the program closes it.
void await_connected(UpgradeConn* c) {
  auto w = engine()->loop->watch(c->tcp_fd, kWritable, [c](std::uint32_t /*events*/) {
    engine()->loop->unwatch(std::exchange(c->connect_watch, WatchId{}));
    sockaddr_in6 peer{};
    socklen_t len = sizeof peer;
    if (g_engine_real->getpeername(c->tcp_fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) {
      std::lock_guard lock(c->mu);
      set_result(*c, Fallback::peer);
      return;
    }
    {
      // Connected: its stats line is due even if the data calls (the engine's, which do
      // not settle the state as the TCP path's do) move no byte before the last close, by
      // when the kernel may no longer name the peer.
      std::lock_guard lock(c->mu);
      SocketState connecting = SocketState::connecting;
      if (c->obj != nullptr) {
        c->obj->state.compare_exchange_strong(connecting, SocketState::connected,
                                              std::memory_order_acq_rel);
      }
    }
    start_connect(c);
  });
  if (!w) {
    std::lock_guard lock(c->mu);
    set_result(*c, Fallback::busy);
    return;
  }
  c->connect_watch = w.value();
}

}  // namespace

void upgrade_established(int fd, SocketObject& o, bool acceptor) {
  UpgradeConn* c = adopt_conn(fd, o, acceptor, false);
  if (c != nullptr && !acceptor) engine()->loop->post([c] { start_connect(c); });
}

void upgrade_connecting(int fd, SocketObject& o) {
  UpgradeConn* c = adopt_conn(fd, o, false, true);
  if (c != nullptr) engine()->loop->post([c] { await_connected(c); });
}

void upgrade_closed(UpgradeConn& c, SocketObject& /*o*/) {
  {
    std::lock_guard lock(c.mu);
    c.obj = nullptr;
  }
  if (!engine_on(engine())) return;  // a fork child's copy: the parent's engine owns it
  {
    std::lock_guard lock(engine()->drain_mu);
    ++engine()->draining;
  }
  engine()->loop->post([&c] {
    c.closing = true;
    if (c.connect_watch != WatchId{}) {  // closed while the kernel was still connecting
      engine()->loop->unwatch(std::exchange(c.connect_watch, WatchId{}));
      set_result(c, Fallback::peer);
    }
    if (!c.stream) {
      if (c.acceptor || c.offered || c.result != Fallback::pending) free_conn(&c);
      // else: the connect callback frees it
      return;
    }
    bool unread = false;
    bool wrote_rdma = false;
    {
      std::lock_guard lock(c.mu);
      unread = !c.rx.empty() && c.read_rdma;
      // The connector writes over RDMA from the nonce on, before the CUTOVER comes.
      wrote_rdma = c.wmode == WriteMode::rdma;
    }
    if (unread || !wrote_rdma) {
      c.stream.close();  // abortive: unread bytes are a reset, as on TCP
      free_conn(&c);
      return;
    }
    flush(c);  // the rest of tx, then FIN and the graceful close
  });
}

// exit(): the connections the program still holds close as the kernel closes them (their
// bytes and FIN, or a reset with unread bytes); then the process waits, bounded, until
// every peer acknowledged what it was sent; then the loop stops, before the statics its
// streams use are destroyed (the engine itself is never freed).
void upg::at_exit() {
  Engine* e = engine();
  if (e->pid != getpid() || !e->thread.joinable()) return;
  std::vector<std::pair<UpgradeConn*, SocketObject*>> open;
  {
    std::lock_guard lock(e->map_mu);
    for (UpgradeConn* c : e->conns) {
      std::lock_guard cl(c->mu);
      if (c->obj != nullptr) open.emplace_back(c, c->obj);
    }
  }
  for (auto& [c, o] : open) {
    c->held_at_exit = true;  // before the post that leads to free_conn on the loop
    upgrade_closed(*c, *o);
  }
  // Accepted streams whose OFFER never came carry no program byte.
  e->loop->post([e] {
    for (Stream& s : e->offers) s.close();
    e->offers.clear();
  });
  {
    std::unique_lock lock(e->drain_mu);
    e->drained.wait_for(lock, kExitWait,
                        [e] { return e->draining == 0 && e->streams.live() == 0; });
  }
  e->loop->stop();
  e->thread.join();
}

const RealCalls* g_engine_real = nullptr;
std::atomic<void (*)()> g_tcp_read_window{nullptr};

}  // namespace rmsg::posix
