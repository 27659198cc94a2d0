// libFuzzer target: the authentication exchange as the acceptor sees it (docs/protocol.md,
// Messenger: Authentication). Input: the bytes a connector sends: its banner (with or
// without the auth field) and the frames after it, fed to the wire decoder, which hands the
// banner's bytes to an auth::Exchange and every auth_proof frame's payload to its check().
// Keys are fixed (auth_fuzz_keys.h), so a seed with a valid proof reaches the success path.
// Properties:
//   - a proof payload that decodes encodes back to the same bytes;
//   - check() succeeds only for the one other listed node, with its listed key; it then
//     (and after a failure) refuses a second proof (unexpected);
//   - nothing crashes or reads out of bounds (ASan/UBSan in the fuzzer build).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "auth/auth_errors.h"
#include "auth/exchange.h"
#include "fuzz/auth_fuzz_keys.h"
#include "wire/banner.h"
#include "wire/frame_decoder.h"

namespace {

using namespace rmsg;

void check(bool ok) {
  if (!ok) __builtin_trap();
}

struct Fixture {
  auth::PrivateKey self = auth::PrivateKey::from_pem(fuzz::kFuzzSelfPem).value();
  auth::PrivateKey peer = auth::PrivateKey::from_pem(fuzz::kFuzzPeerPem).value();
  auth::Keyring ring =
      auth::Keyring::parse(std::to_string(fuzz::kFuzzPeer) + " " + auth::to_hex(peer.public_key()) +
                           "\n" + std::to_string(fuzz::kFuzzSelf) + " " +
                           auth::to_hex(self.public_key()) + "\n")
          .value();
  std::vector<std::byte> own_banner = [] {
    wire::Banner b;
    b.supported = b.required = wire::kFeatureAuthenticated;
    wire::BannerAuth a;
    a.node = fuzz::kFuzzSelf;
    a.nonce.fill(std::byte{fuzz::kFuzzNonceByte});
    b.auth = a;
    return wire::encode_banner_ext(b);
  }();
};

const Fixture& fixture() {
  static const Fixture f;
  return f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const Fixture& f = fixture();
  wire::DecoderOptions o;
  o.local.supported = o.local.required = wire::kFeatureAuthenticated;
  o.limits.max_frame_size = 4096;
  wire::WireDecoder dec(o);
  auth::Exchange x(auth::Role::acceptor, fuzz::kFuzzSelf, 0, f.own_banner);
  std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data), size);
  bool verified = false;
  while (!in.empty()) {
    const auto ev = dec.feed(in);
    if (ev == wire::DecodeEvent::error) break;
    if (ev == wire::DecodeEvent::banner) {
      check(dec.peer_banner_bytes().size() >= wire::kBannerSize);
      check(x.proof(f.self, dec.peer_banner_bytes()).ok());
      continue;
    }
    if (ev != wire::DecodeEvent::frame) continue;
    const wire::Frame fr = dec.take_frame();
    if (fr.type() != wire::FrameType::auth_proof) continue;
    const auto payload = fr.segment(0);
    if (auto p = auth::decode_proof(payload); p.ok()) {
      const auto back = auth::encode_proof(p.value());
      check(std::equal(back.begin(), back.end(), payload.begin(), payload.end()));
    }
    const bool was_waiting = x.state() == auth::Exchange::State::proof;
    auto who = x.check(payload, f.ring);
    if (who.ok()) {
      check(was_waiting && !verified && who.value() == fuzz::kFuzzPeer);
      check(auth::decode_proof(payload).value().key == f.peer.public_key());
      verified = true;
    } else if (!was_waiting) {
      check(who.error() == make_error_code(auth::AuthErrc::unexpected));
    }
  }
  return 0;
}
