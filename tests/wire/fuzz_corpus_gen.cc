// Writes the seed corpora of the messenger's fuzz targets (tests/fuzz/corpus/frame_decoder,
// .../handshake): valid banners and frames of every type, and one of each error the decoder
// knows, so the fuzzers start from the interesting states instead of finding the magic and
// the CRCs by chance. Deterministic: rerunning it rewrites the same files.
//   msg_fuzz_corpus CORPUS_DIR    (CORPUS_DIR/frame_decoder/*, CORPUS_DIR/handshake/*)
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "auth/exchange.h"
#include "fuzz/auth_fuzz_keys.h"
#include "wire/banner.h"
#include "wire/crc32c.h"
#include "wire/frame_bytes.h"
#include "wire/frame_encoder.h"
#include "wire/wire_test_util.h"

namespace {

using namespace rmsg::wire;
using Bytes = std::vector<std::byte>;
using wire_test::append;
using wire_test::bytes_of;

Bytes frame(FrameType t, std::vector<Bytes> payloads, std::vector<std::uint16_t> aligns = {}) {
  std::vector<Segment> segs;
  for (std::size_t i = 0; i < payloads.size(); ++i) {
    segs.push_back({payloads[i], i < aligns.size() ? aligns[i] : std::uint16_t{0}});
  }
  return wire_test::frame_bytes(t, segs, FrameLimits{0xFFFFFFFF});
}

Bytes crafted(const Preamble& p) {
  Bytes out(kPreambleSize);
  encode_preamble(p, std::span<std::byte, kPreambleSize>(out.data(), kPreambleSize));
  return out;
}

Bytes banner_bytes(Banner b = {}) {
  const auto a = encode_banner(b);
  return {a.begin(), a.end()};
}

// frame_decoder inputs: mode byte (bit 0 banner first, bit 1 64-byte limit, bit 2 we
// require feature 0), chunking seed, then the wire bytes.
Bytes fd(std::uint8_t mode, std::uint8_t seed, const Bytes& wire) {
  Bytes out{std::byte{mode}, std::byte{seed}};
  append(out, wire);
  return out;
}

// handshake inputs: A's and B's banner fields, then the bytes after the banner.
Bytes hs(const Banner& a, const Banner& b, const Bytes& after) {
  Bytes out(40);
  for (int i = 0; i < 2; ++i) {
    const Banner& x = i == 0 ? a : b;
    std::byte* p = out.data() + 20 * i;
    store_le<std::uint16_t>(p, x.version_min);
    store_le<std::uint16_t>(p + 2, x.version_max);
    store_le<std::uint64_t>(p + 4, x.supported);
    store_le<std::uint64_t>(p + 12, x.required);
  }
  append(out, after);
  return out;
}

void write(const std::filesystem::path& dir, const std::string& name, const Bytes& b) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary)
      .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

// auth_handshake: a connector's banner and proof as the fuzzer's acceptor (fixed keys,
// tests/fuzz/auth_fuzz_keys.h) receives them: one that verifies, and its near misses.
void write_auth_seeds(const std::filesystem::path& dir, const Bytes& hello) {
  namespace fz = rmsg::fuzz;
  using namespace rmsg::auth;
  const auto self = PrivateKey::from_pem(fz::kFuzzSelfPem).value();
  const auto peer = PrivateKey::from_pem(fz::kFuzzPeerPem).value();
  auto banner_of = [](std::uint64_t node, std::uint8_t nonce) {
    Banner b;
    b.supported = b.required = kFeatureAuthenticated;
    BannerAuth a;
    a.node = node;
    a.nonce.fill(std::byte{nonce});
    b.auth = a;
    return encode_banner_ext(b);
  };
  const Bytes own = banner_of(fz::kFuzzSelf, fz::kFuzzNonceByte);
  const Bytes theirs = banner_of(fz::kFuzzPeer, 0x11);
  auto proof_frame = [&](const PrivateKey& key, std::uint64_t node) {
    Exchange x(Role::connector, node, fz::kFuzzSelf, theirs);
    const auto p = x.proof(key, own).value();
    return frame(FrameType::auth_proof, {Bytes(p.begin(), p.end())});
  };
  const Bytes good = proof_frame(peer, fz::kFuzzPeer);
  Bytes valid = theirs;
  append(valid, good);
  append(valid, hello);
  write(dir, "valid", valid);
  Bytes twice = theirs;
  append(twice, good);
  append(twice, good);
  write(dir, "twice", twice);
  Bytes wrong_key = theirs;
  append(wrong_key, proof_frame(self, fz::kFuzzPeer));
  write(dir, "wrong_key", wrong_key);
  Bytes flipped = theirs;
  Bytes bad = good;
  bad[kPreambleSize + 100] ^= std::byte{4};
  // The segment's CRC no longer matches: recompute it, the signature alone is wrong.
  const std::size_t crc_at = kPreambleSize + kProofSize;
  store_le<std::uint32_t>(bad.data() + crc_at, crc32c(std::span<const std::byte>(
                                                   bad.data() + kPreambleSize, kProofSize)));
  append(flipped, bad);
  write(dir, "flipped_signature", flipped);
  Bytes plain = banner_bytes(Banner{1, 1, kFeatureAuthenticated, 0});
  append(plain, good);
  write(dir, "no_auth_field", plain);
  Bytes short_proof = theirs;
  append(short_proof, frame(FrameType::auth_proof, {Bytes(kProofSize - 1, std::byte{1})}));
  write(dir, "short_proof", short_proof);
  Bytes reflected = own;
  append(reflected, frame(FrameType::auth_proof, {Bytes(kProofSize, std::byte{0})}));
  write(dir, "reflected_banner", reflected);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  const std::filesystem::path root(argv[1]);
  const auto fdir = root / "frame_decoder";
  const auto hdir = root / "handshake";

  const Bytes hello = frame(FrameType::hello, {bytes_of("hello")});
  const Bytes message = frame(
      FrameType::message, {bytes_of("header"), bytes_of("front"), {}, Bytes(100, std::byte{0xD7})},
      {0, 8, 0, 4096});
  const Bytes keepalive = frame(FrameType::keepalive, {});
  Bytes session = banner_bytes();
  append(session, hello);
  append(session, message);
  append(session, keepalive);
  write(fdir, "session", fd(1, 0x11, session));
  write(fdir, "session_bytewise", fd(1, 0x00, session));

  Bytes every_type;
  for (std::uint8_t t = kFirstFrameType; t <= kLastFrameType; ++t) {
    append(every_type, frame(static_cast<FrameType>(t), {Bytes(t, std::byte{t})}));
  }
  write(fdir, "every_type", fd(0, 0x37, every_type));
  write(fdir, "at_limit", fd(2, 0x21, frame(FrameType::message, {Bytes(64, std::byte{1})})));
  write(fdir, "oversize", fd(2, 0x21, frame(FrameType::message, {Bytes(65, std::byte{1})})));

  auto bad = message;
  bad[5] ^= std::byte{1};
  write(fdir, "preamble_crc", fd(0, 0x05, bad));
  bad = message;
  bad[kPreambleSize + 2] ^= std::byte{1};
  write(fdir, "segment_crc", fd(0, 0x05, bad));
  write(fdir, "truncated", fd(0, 0x05, Bytes(message.begin(), message.end() - 3)));
  Preamble many;
  many.segment_count = 5;
  write(fdir, "segment_count", fd(0, 0x09, crafted(many)));
  Preamble unknown;
  unknown.type = static_cast<FrameType>(200);
  write(fdir, "unknown_type", fd(0, 0x09, crafted(unknown)));
  Preamble secure;
  secure.flags = kFlagSecure;
  write(fdir, "secure_flag", fd(0, 0x09, crafted(secure)));
  Preamble odd;
  odd.segment_count = 1;
  odd.lengths[0] = 4;
  odd.alignments[0] = 12;
  write(fdir, "bad_alignment", fd(0, 0x09, crafted(odd)));
  write(fdir, "bad_magic", fd(1, 0x03, bytes_of("GET / HTTP/1.1\r\n\r\n")));
  write(fdir, "bad_version", fd(1, 0x03, banner_bytes(Banner{7, 9, 0, 0})));
  write(fdir, "missing_features", fd(5, 0x03, banner_bytes(Banner{1, 1, 0, 0})));
  Bytes ext = banner_bytes();
  ext.resize(kBannerFixedSize);
  store_le<std::uint16_t>(ext.data() + 12, 3);
  append(ext, Bytes{std::byte{0x7F}, std::byte{1}, std::byte{0}});  // an unknown field
  ext.resize(ext.size() + 4);
  store_le<std::uint32_t>(ext.data() + ext.size() - 4,
                          crc32c(std::span<const std::byte>(ext.data(), ext.size() - 4)));
  append(ext, keepalive);
  write(fdir, "banner_extension", fd(1, 0x13, ext));

  Bytes after = hello;
  append(after, message);
  write(hdir, "agree", hs(Banner{1, 1, 0xF, 0x1}, Banner{1, 2, 0x3, 0x2}, after));
  write(hdir, "version_range", hs(Banner{1, 4, 0, 0}, Banner{3, 6, 0, 0}, keepalive));
  write(hdir, "bad_version", hs(Banner{1, 1, 0, 0}, Banner{2, 2, 0, 0}, {}));
  write(hdir, "missing_features", hs(Banner{1, 1, 0x1, 0x1}, Banner{1, 1, 0x2, 0}, hello));
  write(hdir, "inverted_range", hs(Banner{3, 1, 0, 0}, Banner{1, 1, 0, 0}, {}));
  write(hdir, "garbage_after", hs(Banner{}, Banner{}, bytes_of("not a preamble, just text!!!!!!")));
  write_auth_seeds(root / "auth_handshake", hello);
  std::printf("wrote %s and %s\n", fdir.c_str(), hdir.c_str());
  return 0;
}
