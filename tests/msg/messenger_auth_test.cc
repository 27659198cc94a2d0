// Authenticated nodes over real TCP (docs/security.md): two messengers with keys, and a
// raw client that plays an impostor: without a key (review #3's takeover, with the real
// node connected and with it down), with a wrong key, replaying, reflecting, splicing and
// flipping bits. Each is refused with its counted error, and leaves no session behind.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <fstream>

#include "auth/exchange.h"
#include "msg/messenger_real_fixture.h"
#include "rmsg/loop_threads.h"
#include "rmsg/tcp.h"
#include "wire/banner.h"
#include "wire/frame_encoder.h"
#include "wire/session_frames.h"

namespace rmsg::testing {
namespace {

using wire::FrameType;
using namespace std::chrono_literals;

constexpr NodeId kM = 3;  // a node with a listed key of its own (an insider)

// A client that speaks the wire by hand.
class RawPeer {
 public:
  RawPeer(EventLoop& loop, std::uint16_t port) : loop_(loop) {
    tcp_connect(loop_, SocketAddress::from_host_port("127.0.0.1", port).value(), {},
                [this](Result<Stream> r) {
                  ASSERT_TRUE(r.ok()) << r.error().message();
                  s_ = std::move(r).value();
                });
    loop_.run_for([&] { return s_.valid(); }, 5s);
  }
  bool valid() const { return s_.valid(); }
  void send(std::span<const std::byte> bytes) {
    auto w = s_.write(bytes);
    ASSERT_TRUE(w.ok() && w.value() == bytes.size());
  }
  void send_frame(FrameType type, std::span<const std::byte> payload) {
    std::array<std::byte, 512> buf{};
    const wire::Segment seg{payload, 0};
    auto n = wire::encode_frame_to(buf, type, std::span(&seg, 1), {});
    ASSERT_TRUE(n.ok());
    send(std::span(buf).first(n.value()));
  }
  void send_hello(NodeId node, NodeId target) {
    send_frame(FrameType::client_ident, wire::encode(wire::Hello{.node = node,
                                                                 .target = target,
                                                                 .client_cookie = 0xc1a1,
                                                                 .global_seq = 1,
                                                                 .connect_seq = 1}));
  }
  // The peer's banner, every byte (its extension included).
  std::vector<std::byte> read_banner() {
    loop_.run_for(
        [&] {
          pull();
          if (in_.size() < wire::kBannerFixedSize) return false;
          const std::size_t ext =
              std::to_integer<std::size_t>(in_[12]) | std::to_integer<std::size_t>(in_[13]) << 8;
          return in_.size() >= wire::kBannerSize + ext;
        },
        5s);
    if (in_.size() < wire::kBannerFixedSize) return {};
    const std::size_t ext =
        std::to_integer<std::size_t>(in_[12]) | std::to_integer<std::size_t>(in_[13]) << 8;
    const std::size_t n = std::min(in_.size(), wire::kBannerSize + ext);
    std::vector<std::byte> b(in_.begin(), in_.begin() + static_cast<std::ptrdiff_t>(n));
    in_.erase(in_.begin(), in_.begin() + static_cast<std::ptrdiff_t>(n));
    return b;
  }
  // The next frame's single segment (an auth proof), or empty.
  std::vector<std::byte> read_proof() {
    constexpr std::size_t kFrame = wire::kPreambleSize + auth::kProofSize + 4;
    loop_.run_for([&] { return pull(), in_.size() >= kFrame; }, 5s);
    if (in_.size() < kFrame || static_cast<FrameType>(in_[0]) != FrameType::auth_proof) return {};
    std::vector<std::byte> p(in_.begin() + wire::kPreambleSize,
                             in_.begin() + wire::kPreambleSize + auth::kProofSize);
    in_.erase(in_.begin(), in_.begin() + kFrame);
    return p;
  }
  // Whether the other side closed the connection within `limit`.
  bool closed_by_peer(Duration limit = 5s) {
    return loop_.run_for([&] { return pull(), eof_; }, limit);
  }

 private:
  void pull() {
    std::array<std::byte, 4096> buf{};
    for (;;) {
      auto n = s_.read(buf);
      if (!n.ok()) {
        if (!n.is(Errc::would_block)) eof_ = true;
        return;
      }
      if (n.value() == 0) {
        eof_ = true;
        return;
      }
      in_.insert(in_.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n.value()));
    }
  }
  EventLoop& loop_;
  Stream s_;
  std::vector<std::byte> in_;
  bool eof_ = false;
};

std::vector<std::byte> auth_banner(NodeId node) {
  wire::Banner b;
  b.supported = b.required = wire::kFeatureAuthenticated;
  b.auth = wire::BannerAuth{node, auth::random_nonce().value()};
  return wire::encode_banner_ext(b);
}

class MessengerAuthTest : public MessengerRealTest {
 protected:
  ConnectionParams params() const override {
    ConnectionParams p;
    p.transport = Transport::tcp;
    return p;
  }
  std::string host() const override { return "127.0.0.1"; }

  void SetUp() override {
    MessengerRealTest::SetUp();
    char tmpl[] = "/tmp/rmsg-msgauth-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::ofstream ring(dir_ + "/keyring");
    for (const NodeId n : {kA, kB, kM}) {
      auto k = auth::PrivateKey::create(key_path(n));
      ASSERT_TRUE(k);
      ring << n << " " << auth::to_hex(k.value().public_key()) << "\n";
    }
    auto other = auth::PrivateKey::create(dir_ + "/other.key");  // listed for nobody
    ASSERT_TRUE(other);
  }
  void TearDown() override {
    MessengerRealTest::TearDown();
    for (const char* f : {"/1.key", "/2.key", "/3.key", "/other.key", "/keyring", "/9.key"}) {
      ::unlink((dir_ + f).c_str());
    }
    ::rmdir(dir_.c_str());
  }
  std::string key_path(NodeId n) const { return dir_ + "/" + std::to_string(n) + ".key"; }
  MessengerOptions options(NodeId id) const override {
    MessengerOptions o = MessengerRealTest::options(id);
    o.auth = policy_;
    o.auth_key_file = key_path(id);
    o.auth_keyring_file = dir_ + "/keyring";
    return o;
  }
  auth::PrivateKey key(NodeId n) const { return auth::PrivateKey::load(key_path(n)).value(); }
  auth::Keyring ring() const { return auth::Keyring::load(dir_ + "/keyring").value(); }
  std::uint16_t port_b() const { return SocketAddress::parse(b_.address).value().port(); }
  void connected() {
    start_both();
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(a_.node.send_next(kB).ok());
    ASSERT_TRUE(run([&] { return all_delivered(a_.node, kA, b_.node, kB, 5); }));
  }
  // B is undisturbed: no reset, A's session whole, no session for anyone else.
  void expect_b_undisturbed() {
    EXPECT_EQ(b_.node.count(SessionEvent::Kind::reset), 0);
    EXPECT_EQ(b_.node.counter("msg.sessions"), 1u);
    EXPECT_FALSE(b_.node.m->session_info(kM).has_value());
  }
  // An impostor that proves with `signer`'s key (claiming `claimed`) to B.
  void prove_to_b(const auth::PrivateKey& signer, NodeId claimed) {
    RawPeer p(*loop_, port_b());
    ASSERT_TRUE(p.valid());
    const auto mine = auth_banner(claimed);
    p.send(mine);
    const auto theirs = p.read_banner();
    auth::Exchange x(auth::Role::connector, claimed, kB, mine);
    auto proof = x.proof(signer, theirs);
    ASSERT_TRUE(proof);
    p.send_frame(FrameType::auth_proof, proof.value());
    p.send_hello(claimed, kB);
    EXPECT_TRUE(p.closed_by_peer());
  }

  AuthPolicy policy_ = AuthPolicy::require;
  std::string dir_;
};

TEST_F(MessengerAuthTest, AuthenticatedNodesExchangeMessagesBothWays) {
  start_both(true);
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(a_.node.send_next(kB).ok());
    ASSERT_TRUE(b_.node.send_next(kA).ok());
  }
  ASSERT_TRUE(run([&] {
    return all_delivered(a_.node, kA, b_.node, kB, 20) &&
           all_delivered(b_.node, kB, a_.node, kA, 20);
  }));
  EXPECT_GE(a_.node.counter("msg.auth.ok"), 1u);
  EXPECT_GE(b_.node.counter("msg.auth.ok"), 1u);
  EXPECT_TRUE(a_.node.m->session_info(kB)->authenticated);
  EXPECT_TRUE(b_.node.m->session_info(kA)->authenticated);
  EXPECT_EQ(a_.node.counter("msg.auth.refused") + b_.node.counter("msg.auth.refused"), 0u);
  // A reconnect authenticates again, and loses nothing.
  a_.streams->kill_all();
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(a_.node.send_next(kB).ok());
  ASSERT_TRUE(run([&] { return all_delivered(a_.node, kA, b_.node, kB, 40); }));
  EXPECT_GE(b_.node.counter("msg.auth.ok"), 2u);
  expect_exactly_once(a_.node, kA, b_.node, kB);
}

// Review #3 with keys: a peer without A's key claims A while A is connected.
TEST_F(MessengerAuthTest, ImpostorWithoutAKeyIsRefusedWhileTheNodeIsConnected) {
  connected();
  RawPeer p(*loop_, port_b());
  p.send(wire::encode_banner(wire::Banner{}));  // no authentication offered
  p.send_hello(kA, kB);
  EXPECT_TRUE(p.closed_by_peer());
  EXPECT_EQ(b_.node.counter("msg.errors.missing_features"), 1u);  // B requires it
  expect_b_undisturbed();
  EXPECT_EQ(a_.node.count(SessionEvent::Kind::disconnected), 0);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(a_.node.send_next(kB).ok());
  ASSERT_TRUE(run([&] { return all_delivered(a_.node, kA, b_.node, kB, 10); }));
}

// ... and while A is down: B still refuses, and keeps A's session for the real A.
TEST_F(MessengerAuthTest, ImpostorWithoutAKeyIsRefusedWhileTheNodeIsDown) {
  connected();
  a_.node.m.reset();
  ASSERT_TRUE(run([&] { return !b_.node.m->session_info(kA)->connected; }));
  RawPeer p(*loop_, port_b());
  p.send(wire::encode_banner(wire::Banner{}));
  p.send_hello(kA, kB);
  EXPECT_TRUE(p.closed_by_peer());
  EXPECT_EQ(b_.node.counter("msg.errors.missing_features"), 1u);
  expect_b_undisturbed();
}

// With the offer policy a peer may come without a key, but not as a node the keyring
// lists: that would be a downgrade.
TEST_F(MessengerAuthTest, OfferPolicyRefusesAListedNodeThatDoesNotAuthenticate) {
  policy_ = AuthPolicy::offer;
  connected();
  a_.node.m.reset();
  RawPeer p(*loop_, port_b());
  p.send(wire::encode_banner(wire::Banner{}));
  p.send_hello(kA, kB);
  EXPECT_TRUE(p.closed_by_peer());
  EXPECT_EQ(b_.node.counter("msg.errors.not_offered"), 1u);
  expect_b_undisturbed();
  // A node the keyring does not list may still come without one (the transition).
  RawPeer q(*loop_, port_b());
  q.send(wire::encode_banner(wire::Banner{}));
  q.send_hello(0x77, kB);
  ASSERT_TRUE(run([&] {
    auto info = b_.node.m->session_info(0x77);
    return info && info->connected;
  }));
  EXPECT_FALSE(b_.node.m->session_info(0x77)->authenticated);
}

TEST_F(MessengerAuthTest, WrongKeyIsRefused) {
  connected();
  a_.node.m.reset();
  prove_to_b(auth::PrivateKey::load(dir_ + "/other.key").value(), kA);
  prove_to_b(key(kM), kA);  // an insider's own, listed key does not speak for A
  EXPECT_EQ(b_.node.counter("msg.errors.unknown_key"), 2u);
  EXPECT_EQ(b_.node.counter("msg.auth.refused"), 2u);
  expect_b_undisturbed();
}

TEST_F(MessengerAuthTest, ReplayedHandshakeIsRefused) {
  connected();
  // A's side of a genuine handshake, recorded (the raw client holds A's key)...
  RawPeer p(*loop_, port_b());
  const auto mine = auth_banner(kA);
  p.send(mine);
  auth::Exchange x(auth::Role::connector, kA, kB, mine);
  auto proof = x.proof(key(kA), p.read_banner());
  ASSERT_TRUE(proof);
  p.send_frame(FrameType::auth_proof, proof.value());
  ASSERT_TRUE(run([&] { return b_.node.counter("msg.auth.ok") >= 2; }));
  // ... replayed byte for byte on a new connection: B's new nonce makes it worthless.
  RawPeer q(*loop_, port_b());
  q.send(mine);
  q.send_frame(FrameType::auth_proof, proof.value());
  q.send_hello(kA, kB);
  EXPECT_TRUE(q.closed_by_peer());
  EXPECT_EQ(b_.node.counter("msg.errors.bad_signature"), 1u);
  EXPECT_EQ(b_.node.count(SessionEvent::Kind::reset), 0);
}

TEST_F(MessengerAuthTest, ReflectedHandshakeIsRefused) {
  connected();
  RawPeer p(*loop_, port_b());
  const auto theirs = p.read_banner();
  p.send(theirs);                     // B's own banner back
  const auto proof = p.read_proof();  // and B's own proof
  ASSERT_EQ(proof.size(), auth::kProofSize);
  p.send_frame(FrameType::auth_proof, proof);
  EXPECT_TRUE(p.closed_by_peer());
  EXPECT_EQ(b_.node.counter("msg.errors.wrong_peer"), 1u);
  expect_b_undisturbed();
}

// A man in the middle with a connection to each of A and B moves A's proof from one
// handshake to the other (after making the banners as alike as it can).
TEST_F(MessengerAuthTest, SplicedHandshakeIsRefused) {
  start(a_, kA, 0);
  start(b_, kB, 0);
  RawPeer to_b(*loop_, port_b());
  const auto banner_b = to_b.read_banner();
  RawPeer to_a(*loop_, SocketAddress::parse(a_.address).value().port());
  to_a.send(banner_b);  // to A, M presents B's banner
  const auto banner_a = to_a.read_banner();
  const auto proof_a = to_a.read_proof();
  ASSERT_EQ(proof_a.size(), auth::kProofSize);
  to_b.send(banner_a);  // to B, A's
  to_b.send_frame(FrameType::auth_proof, proof_a);
  to_b.send_hello(kA, kB);
  EXPECT_TRUE(to_b.closed_by_peer());
  EXPECT_EQ(b_.node.counter("msg.auth.refused"), 1u);
  EXPECT_EQ(b_.node.counter("msg.sessions"), 0u);
  EXPECT_FALSE(b_.node.m->session_info(kA).has_value());
}

TEST_F(MessengerAuthTest, FlippedBitsAreRefused) {
  connected();
  const auto a_key = key(kA);
  for (const std::size_t bit : {0UL, 70UL, 130UL, 300UL, 500UL, 895UL}) {
    RawPeer p(*loop_, port_b());
    const auto mine = auth_banner(kA);
    p.send(mine);
    auth::Exchange x(auth::Role::connector, kA, kB, mine);
    auto proof = x.proof(a_key, p.read_banner());
    ASSERT_TRUE(proof);
    auto bad = proof.value();
    bad[bit / 8] ^= static_cast<std::byte>(1U << (bit % 8));
    p.send_frame(FrameType::auth_proof, bad);
    p.send_hello(kA, kB);
    EXPECT_TRUE(p.closed_by_peer()) << bit;
  }
  EXPECT_EQ(b_.node.counter("msg.auth.refused"), 6u);
  expect_b_undisturbed();
}

TEST_F(MessengerAuthTest, HelloBeforeTheProofIsRefused) {
  connected();
  RawPeer p(*loop_, port_b());
  p.send(auth_banner(kA));
  p.send_hello(kA, kB);
  EXPECT_TRUE(p.closed_by_peer());
  EXPECT_EQ(b_.node.counter("msg.errors.unexpected"), 1u);
  expect_b_undisturbed();
}

TEST_F(MessengerAuthTest, PeerWithoutKeysMeetsARequirement) {
  start(b_, kB, 0);
  policy_ = AuthPolicy::off;
  start(a_, kA, 0);
  ASSERT_TRUE(a_.node.m->add_peer(kB, peer_params(b_)).ok());
  ASSERT_TRUE(a_.node.send_next(kB).ok());
  ASSERT_TRUE(run([&] { return a_.node.count(SessionEvent::Kind::failed) >= 1; }));
  EXPECT_GE(b_.node.counter("msg.errors.missing_features"), 1u);
  EXPECT_EQ(b_.node.counter("msg.sessions"), 0u);
}

TEST_F(MessengerAuthTest, KeyFileReadableByOthersFailsCreate) {
  ASSERT_EQ(::chmod(key_path(kA).c_str(), 0644), 0);
  auto m = Messenger::create(*loop_, options(kA), [](NodeId, std::span<const std::byte>) {});
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().message(), "key file readable or writable by group or others");
}

// Rotation: the keyring lists A's old and new keys; A restarts with the new one.
TEST_F(MessengerAuthTest, RotatedKeyIsAcceptedWhileBothAreListed) {
  connected();
  a_.node.m.reset();
  a_.node = Node{};
  ASSERT_EQ(::rename(key_path(kA).c_str(), (dir_ + "/9.key").c_str()), 0);  // the old one
  auto fresh = auth::PrivateKey::create(key_path(kA));
  ASSERT_TRUE(fresh);
  std::ofstream(dir_ + "/keyring", std::ios::app)
      << kA << " " << auth::to_hex(fresh.value().public_key()) << "\n";
  start(a_, kA, 0);
  ASSERT_TRUE(a_.node.m->add_peer(kB, peer_params(b_)).ok());
  ASSERT_TRUE(a_.node.send_next(kB).ok());
  ASSERT_TRUE(run([&] { return b_.node.count(SessionEvent::Kind::reset) == 1; }));  // restart
  EXPECT_EQ(b_.node.counter("msg.auth.refused"), 0u);
}

// Over several loops, loop 0 routes an accepted TCP connection by its first bytes: with
// keys that is the banner's node id (the hello follows the proofs, which the owner's loop
// checks).
TEST_F(MessengerAuthTest, SeveralLoopsRouteAuthenticatedConnectionsByTheirBanner) {
  auto hub_loops = LoopThreads::create(3).value();  // driven by this thread
  std::uint64_t got = 0;
  auto hub =
      Messenger::create(hub_loops->loops(), options(kB), [&](NodeId, std::span<const std::byte>) {
        ++got;
      }).value();
  const auto any = SocketAddress::parse("127.0.0.1:0").value();
  ConnectionParams p = params();
  p.peer = SocketAddress::parse(hub->listen(any, params()).value()).value();
  std::vector<std::unique_ptr<Messenger>> peers;
  for (const NodeId id : {kA, kM}) {
    peers.push_back(
        Messenger::create(*loop_, options(id), [](NodeId, std::span<const std::byte>) {}).value());
    ASSERT_TRUE(peers.back()->add_peer(kB, p).ok());
    for (int i = 0; i < 10; ++i)
      ASSERT_TRUE(peers.back()->send(kB, std::vector<std::byte>(8)).ok());
  }
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (got < 20 && std::chrono::steady_clock::now() < deadline) {
    loop_->run_for([] { return false; }, 1ms);
    for (std::size_t l = 0; l < 3; ++l) hub_loops->loop(l).run_for([] { return false; }, 1ms);
  }
  EXPECT_EQ(got, 20u);
  EXPECT_EQ(hub->counter_total("msg.sessions"), 2u);
  EXPECT_EQ(hub->counter_total("msg.auth.ok"), 2u);
  EXPECT_EQ(hub->counter_total("msg.route.routed"), 2u);
  EXPECT_EQ(hub->counter_total("msg.auth.refused"), 0u);
  hub.reset();
  peers.clear();
  for (std::size_t l = 0; l < 3; ++l) hub_loops->loop(l).run_for([] { return false; }, 5ms);
}

}  // namespace
}  // namespace rmsg::testing
