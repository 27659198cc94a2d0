// Key files, the keyring and signatures (src/auth/keys.h, keyring.h).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "auth/auth_errors.h"
#include "auth/keyring.h"
#include "auth/keys.h"

namespace rmsg::auth {
namespace {

class KeyFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rmsg-auth-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    for (const auto& f : files_) ::unlink(f.c_str());
    ::rmdir(dir_.c_str());
  }
  std::string path(const std::string& name) {
    files_.push_back(dir_ + "/" + name);
    return files_.back();
  }
  std::string dir_;
  std::vector<std::string> files_;
};

std::span<const std::byte> bytes_of(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

TEST_F(KeyFiles, CreatedKeyLoadsBackWithTheSamePublicKeyAndMode0600) {
  const std::string p = path("node.key");
  auto made = PrivateKey::create(p);
  ASSERT_TRUE(made) << made.error().message();
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto loaded = PrivateKey::load(p);
  ASSERT_TRUE(loaded) << loaded.error().message();
  EXPECT_EQ(loaded.value().public_key(), made.value().public_key());
  EXPECT_FALSE(PrivateKey::create(p)) << "an existing key file is never overwritten";
}

TEST_F(KeyFiles, KeyReadableByGroupOrOthersIsRefused) {
  const std::string p = path("node.key");
  ASSERT_TRUE(PrivateKey::create(p));
  for (const mode_t mode : {0640, 0604, 0620, 0660, 0644}) {
    ASSERT_EQ(::chmod(p.c_str(), mode), 0);
    auto r = PrivateKey::load(p);
    ASSERT_FALSE(r) << std::oct << mode;
    EXPECT_EQ(r.error(), make_error_code(AuthErrc::key_permissions)) << std::oct << mode;
  }
  ASSERT_EQ(::chmod(p.c_str(), 0400), 0);
  EXPECT_TRUE(PrivateKey::load(p));
}

TEST_F(KeyFiles, MissingOrGarbageKeyFileIsKeyFile) {
  EXPECT_EQ(PrivateKey::load(path("absent")).error(), make_error_code(AuthErrc::key_file));
  const std::string p = path("garbage");
  std::ofstream(p) << "not a key\n";
  ::chmod(p.c_str(), 0600);
  EXPECT_EQ(PrivateKey::load(p).error(), make_error_code(AuthErrc::key_file));
}

TEST_F(KeyFiles, SignatureVerifiesOnlyForItsMessageAndKey) {
  auto a = PrivateKey::create(path("a.key"));
  auto b = PrivateKey::create(path("b.key"));
  ASSERT_TRUE(a && b);
  const std::string msg = "the transcript";
  auto sig = a.value().sign(bytes_of(msg));
  ASSERT_TRUE(sig);
  auto va = Verifier::make(a.value().public_key());
  auto vb = Verifier::make(b.value().public_key());
  ASSERT_TRUE(va && vb);
  EXPECT_TRUE(va.value().verify(bytes_of(msg), sig.value()));
  EXPECT_FALSE(vb.value().verify(bytes_of(msg), sig.value())) << "wrong key";
  EXPECT_FALSE(va.value().verify(bytes_of("the transcripT"), sig.value()));
  for (std::size_t bit = 0; bit < sig.value().size() * 8; bit += 37) {
    Signature flipped = sig.value();
    flipped[bit / 8] ^= static_cast<std::byte>(1U << (bit % 8));
    EXPECT_FALSE(va.value().verify(bytes_of(msg), flipped)) << "bit " << bit;
  }
}

TEST(Keyring, ParsesNodesInDecimalAndHexCommentsAndSeveralKeysPerNode) {
  const std::string k1(64, 'a');
  const std::string k2(64, 'b');
  const std::string k3(64, '0');
  auto r = Keyring::parse("# cluster keys\n\n7 " + k1 + "\n0x7 " + k2 + "  # rotated\n  12\t" + k3 +
                          "\r\n");
  ASSERT_TRUE(r) << r.error().message();
  const Keyring& ring = r.value();
  EXPECT_EQ(ring.entries().size(), 3u);
  PublicKey a{};
  PublicKey b{};
  ASSERT_TRUE(from_hex(k1, a) && from_hex(k2, b));
  EXPECT_NE(ring.find(7, a), nullptr);
  EXPECT_NE(ring.find(7, b), nullptr) << "old and new key of one node both accepted";
  EXPECT_EQ(ring.find(12, a), nullptr);
  EXPECT_TRUE(ring.lists(12));
  EXPECT_FALSE(ring.lists(8));
}

TEST(Keyring, MalformedLinesRefuseTheWholeFile) {
  const std::string k(64, 'c');
  for (const std::string& bad : std::vector<std::string>{
           "7", "0 " + k, "-1 " + k, "x7 " + k, "7 " + k.substr(1), "7 " + k + "0",
           "7 " + std::string(64, 'g'), "99999999999999999999999 " + k}) {
    auto r = Keyring::parse(bad + "\n");
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error(), make_error_code(AuthErrc::keyring)) << bad;
  }
}

TEST_F(KeyFiles, KeyStoreRereadsAChangedKeyring) {
  const std::string key = path("own.key");
  const std::string ring = path("ring");
  auto own = PrivateKey::create(key);
  ASSERT_TRUE(own);
  std::ofstream(ring) << "5 " << std::string(64, 'a') << "\n";
  auto store = KeyStore::load(key, ring);
  ASSERT_TRUE(store) << store.error().message();
  EXPECT_FALSE(store.value().keyring().lists(6));
  std::ofstream(ring) << "5 " << std::string(64, 'a') << "\n6 " << std::string(64, 'b') << "\n";
  ASSERT_TRUE(store.value().refresh());
  EXPECT_TRUE(store.value().keyring().lists(6));
  std::ofstream(ring) << "garbage\n";
  EXPECT_FALSE(store.value().refresh());
  EXPECT_TRUE(store.value().keyring().lists(6)) << "a broken file leaves the keys in use";
}

}  // namespace
}  // namespace rmsg::auth
