// The per-connection exchange (src/auth/exchange.h): both sides authenticate, and every
// attack on the proof fails with its named error: wrong key, unknown node, replay,
// reflection, splice, flipped bits.
#include <unistd.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "auth/auth_errors.h"
#include "auth/exchange.h"

namespace rmsg::auth {
namespace {

constexpr NodeId kA = 0xA;
constexpr NodeId kB = 0xB;
constexpr NodeId kM = 0xE;  // an attacker (with a key of its own in the M cases)

class ExchangeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/rmsg-exchange-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    const std::string dir = tmpl;
    for (auto* k : {&a_, &b_, &a2_, &m_}) {
      const std::string p = dir + "/k" + std::to_string(reinterpret_cast<std::uintptr_t>(k));
      auto r = PrivateKey::create(p);
      ASSERT_TRUE(r);
      k->emplace(std::move(r).value());
      ::unlink(p.c_str());
    }
    ::rmdir(dir.c_str());
    std::string text = std::to_string(kA) + " " + to_hex(a_->public_key()) + "\n" +
                       std::to_string(kB) + " " + to_hex(b_->public_key()) + "\n" +
                       std::to_string(kM) + " " + to_hex(m_->public_key()) + "\n";
    auto ring = Keyring::parse(text);
    ASSERT_TRUE(ring);
    ring_.emplace(std::move(ring).value());
  }
  static void TearDownTestSuite() {
    a_.reset();
    b_.reset();
    a2_.reset();
    m_.reset();
    ring_.reset();
  }
  // A banner: its bytes only matter as transcript; each carries a fresh nonce.
  static std::vector<std::byte> banner(char tag) {
    std::vector<std::byte> b(36 + 42, std::byte{static_cast<unsigned char>(tag)});
    auto n = random_nonce();
    EXPECT_TRUE(n);
    std::copy(n.value().begin(), n.value().end(), b.begin() + 46);
    return b;
  }
  static std::optional<PrivateKey> a_, b_, a2_, m_;
  static std::optional<Keyring> ring_;
};
std::optional<PrivateKey> ExchangeTest::a_, ExchangeTest::b_, ExchangeTest::a2_, ExchangeTest::m_;
std::optional<Keyring> ExchangeTest::ring_;

// One honest connection: A connects to B.
struct Pair {
  std::vector<std::byte> ba, bb;
  Exchange a, b;
  std::array<std::byte, kProofSize> pa{}, pb{};
  Pair(std::vector<std::byte> banner_a, std::vector<std::byte> banner_b)
      : ba(std::move(banner_a)),
        bb(std::move(banner_b)),
        a(Role::connector, kA, kB, ba),
        b(Role::acceptor, kB, 0, bb) {}
};

TEST_F(ExchangeTest, BothSidesAuthenticateEachOther) {
  Pair p(banner('a'), banner('b'));
  auto pa = p.a.proof(*a_, p.bb);
  auto pb = p.b.proof(*b_, p.ba);
  ASSERT_TRUE(pa && pb);
  auto at_b = p.b.check(pa.value(), *ring_);
  auto at_a = p.a.check(pb.value(), *ring_);
  ASSERT_TRUE(at_b) << at_b.error().message();
  ASSERT_TRUE(at_a) << at_a.error().message();
  EXPECT_EQ(at_b.value(), kA);
  EXPECT_EQ(at_a.value(), kB);
  EXPECT_EQ(p.a.state(), Exchange::State::done);
}

TEST_F(ExchangeTest, WrongKeyForTheClaimedNodeIsUnknownKey) {
  Pair p(banner('a'), banner('b'));
  ASSERT_TRUE(p.b.proof(*b_, p.ba));
  auto forged = p.a.proof(*a2_, p.bb);  // a key not listed for A
  ASSERT_TRUE(forged);
  EXPECT_EQ(p.b.check(forged.value(), *ring_).error(), make_error_code(AuthErrc::unknown_key));
}

TEST_F(ExchangeTest, ImpostorWithAListedKeyOfAnotherNodeFails) {
  // M has a key (its own) and claims to be A: M's key is not A's.
  Pair p(banner('a'), banner('b'));
  Exchange m(Role::connector, kA, kB, p.ba);
  ASSERT_TRUE(p.b.proof(*b_, p.ba));
  auto forged = m.proof(*m_, p.bb);
  ASSERT_TRUE(forged);
  EXPECT_EQ(p.b.check(forged.value(), *ring_).error(), make_error_code(AuthErrc::unknown_key));
  // Claiming A with M's key and a signature made by M but A's key in the frame: no.
  Proof q = decode_proof(forged.value()).value();
  q.key = a_->public_key();
  Pair p2(banner('a'), banner('b'));
  ASSERT_TRUE(p2.b.proof(*b_, p2.ba));
  EXPECT_EQ(p2.b.check(encode_proof(q), *ring_).error(), make_error_code(AuthErrc::bad_signature));
}

TEST_F(ExchangeTest, ReplayedProofFromAnEarlierConnectionFails) {
  Pair first(banner('a'), banner('b'));
  auto old = first.a.proof(*a_, first.bb);
  ASSERT_TRUE(old);
  // The attacker replays A's whole side (same banner bytes) to a new connection; B's new
  // banner has a new nonce.
  Pair second(first.ba, banner('b'));
  ASSERT_TRUE(second.b.proof(*b_, second.ba));
  EXPECT_EQ(second.b.check(old.value(), *ring_).error(), make_error_code(AuthErrc::bad_signature));
}

TEST_F(ExchangeTest, ReflectedProofFails) {
  // An attacker that sends A's own proof back to A, as acceptor: it names A, not B.
  Pair p(banner('a'), banner('b'));
  auto pa = p.a.proof(*a_, p.bb);
  ASSERT_TRUE(pa);
  EXPECT_EQ(p.a.check(pa.value(), *ring_).error(), make_error_code(AuthErrc::wrong_peer));
  // B's acceptor proof replayed to B as if it were a connector's: it names no target.
  Pair q(banner('a'), banner('b'));
  auto pb = q.b.proof(*b_, q.ba);
  ASSERT_TRUE(pb);
  EXPECT_EQ(q.b.check(pb.value(), *ring_).error(), make_error_code(AuthErrc::wrong_peer));
}

TEST_F(ExchangeTest, ConnectorProofForAnotherTargetFails) {
  // A connected to M (target M); M relays A's proof to B on M's connection to B.
  Exchange a(Role::connector, kA, kM, banner('a'));
  auto bm = banner('m');
  auto pa = a.proof(*a_, bm);
  ASSERT_TRUE(pa);
  Exchange b(Role::acceptor, kB, 0, bm);
  ASSERT_TRUE(b.proof(*b_, banner('a')));
  EXPECT_EQ(b.check(pa.value(), *ring_).error(), make_error_code(AuthErrc::wrong_peer));
}

TEST_F(ExchangeTest, SplicedHandshakesFail) {
  // M sits between A and B with a handshake on each side (its own banners): A's proof,
  // moved to M's connection with B, covers other banners.
  const auto ba = banner('a');
  const auto bm1 = banner('m');  // M as acceptor towards A
  const auto bm2 = banner('n');  // M as connector towards B (claiming A)
  const auto bb = banner('b');
  Exchange a(Role::connector, kA, kB, ba);
  Exchange b(Role::acceptor, kB, 0, bb);
  auto pa = a.proof(*a_, bm1);
  auto pb = b.proof(*b_, bm2);
  ASSERT_TRUE(pa && pb);
  EXPECT_EQ(b.check(pa.value(), *ring_).error(), make_error_code(AuthErrc::bad_signature));
  EXPECT_EQ(a.check(pb.value(), *ring_).error(), make_error_code(AuthErrc::bad_signature));
}

TEST_F(ExchangeTest, EveryFlippedBitOfTheProofFails) {
  const auto ba = banner('a');
  const auto bb = banner('b');
  Exchange a(Role::connector, kA, kB, ba);
  auto pa = a.proof(*a_, bb);
  ASSERT_TRUE(pa);
  for (std::size_t bit = 0; bit < kProofSize * 8; ++bit) {
    auto bad = pa.value();
    bad[bit / 8] ^= static_cast<std::byte>(1U << (bit % 8));
    Exchange b(Role::acceptor, kB, 0, bb);
    ASSERT_TRUE(b.proof(*b_, ba));
    EXPECT_FALSE(b.check(bad, *ring_)) << "bit " << bit;
  }
}

TEST_F(ExchangeTest, EveryFlippedBitOfEitherBannerFails) {
  const auto ba = banner('a');
  const auto bb = banner('b');
  Exchange a(Role::connector, kA, kB, ba);
  auto pa = a.proof(*a_, bb);
  ASSERT_TRUE(pa);
  for (std::size_t bit = 0; bit < ba.size() * 8; bit += 3) {
    for (const bool which : {false, true}) {
      auto xa = ba;
      auto xb = bb;
      auto& x = which ? xa : xb;
      x[bit / 8] ^= static_cast<std::byte>(1U << (bit % 8));
      Exchange b(Role::acceptor, kB, 0, xb);
      ASSERT_TRUE(b.proof(*b_, xa));
      EXPECT_EQ(b.check(pa.value(), *ring_).error(), make_error_code(AuthErrc::bad_signature))
          << "bit " << bit << (which ? " of A's banner" : " of B's banner");
    }
  }
}

TEST_F(ExchangeTest, MalformedAndOutOfTurnProofs) {
  const auto ba = banner('a');
  Exchange b(Role::acceptor, kB, 0, banner('b'));
  std::array<std::byte, kProofSize> zero{};
  EXPECT_EQ(b.check(zero, *ring_).error(), make_error_code(AuthErrc::unexpected))
      << "a proof before our banner exchange completed";
  Exchange b2(Role::acceptor, kB, 0, banner('b'));
  ASSERT_TRUE(b2.proof(*b_, ba));
  EXPECT_EQ(b2.check(std::span(zero).first(kProofSize - 1), *ring_).error(),
            make_error_code(AuthErrc::bad_proof));
  Exchange b3(Role::acceptor, kB, 0, banner('b'));
  ASSERT_TRUE(b3.proof(*b_, ba));
  EXPECT_EQ(b3.check(zero, *ring_).error(), make_error_code(AuthErrc::bad_proof)) << "node 0";
  EXPECT_EQ(b3.state(), Exchange::State::failed);
}

}  // namespace
}  // namespace rmsg::auth
