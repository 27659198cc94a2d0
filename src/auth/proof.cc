// Proof payloads and the transcript digest (proof.h).
#include "auth/proof.h"

#include <openssl/evp.h>

#include <cstring>
#include <memory>

#include "auth/auth_errors.h"

namespace rmsg::auth {
namespace {

constexpr char kContext[] = "rmsg-auth-1";

void put_u64(std::byte* p, std::uint64_t v) noexcept {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}
std::uint64_t get_u64(const std::byte* p) noexcept {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= std::to_integer<std::uint64_t>(p[i]) << (8 * i);
  return v;
}

struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const noexcept { EVP_MD_CTX_free(c); }
};

}  // namespace

std::array<std::byte, kProofSize> encode_proof(const Proof& p) noexcept {
  std::array<std::byte, kProofSize> out{};
  put_u64(out.data(), p.node);
  put_u64(out.data() + 8, p.peer);
  std::memcpy(out.data() + 16, p.key.data(), p.key.size());
  std::memcpy(out.data() + 48, p.signature.data(), p.signature.size());
  return out;
}

Result<Proof> decode_proof(std::span<const std::byte> payload) noexcept {
  if (payload.size() != kProofSize) return make_error_code(AuthErrc::bad_proof);
  Proof p;
  p.node = get_u64(payload.data());
  p.peer = get_u64(payload.data() + 8);
  std::memcpy(p.key.data(), payload.data() + 16, p.key.size());
  std::memcpy(p.signature.data(), payload.data() + 48, p.signature.size());
  if (p.node == 0) return make_error_code(AuthErrc::bad_proof);
  return p;
}

Digest transcript_digest(Role signer, std::uint64_t node, std::uint64_t peer, const PublicKey& key,
                         std::span<const std::byte> connector_banner,
                         std::span<const std::byte> acceptor_banner) noexcept {
  std::array<std::byte, 1 + 8 + 8> head{};
  head[0] = static_cast<std::byte>(signer);
  put_u64(head.data() + 1, node);
  put_u64(head.data() + 9, peer);
  const std::array<std::byte, 2> lc = {static_cast<std::byte>(connector_banner.size()),
                                       static_cast<std::byte>(connector_banner.size() >> 8)};
  const std::array<std::byte, 2> la = {static_cast<std::byte>(acceptor_banner.size()),
                                       static_cast<std::byte>(acceptor_banner.size() >> 8)};
  Digest d{};
  unsigned int len = 0;
  const std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  // A libcrypto failure (out of memory) leaves the digest zero: no signature verifies over
  // it except by a signer that hit the same failure, and that one's sign() fails too.
  if (ctx && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) == 1) {
    EVP_DigestUpdate(ctx.get(), kContext, sizeof(kContext) - 1);
    EVP_DigestUpdate(ctx.get(), head.data(), head.size());
    EVP_DigestUpdate(ctx.get(), key.data(), key.size());
    EVP_DigestUpdate(ctx.get(), lc.data(), lc.size());
    EVP_DigestUpdate(ctx.get(), connector_banner.data(), connector_banner.size());
    EVP_DigestUpdate(ctx.get(), la.data(), la.size());
    EVP_DigestUpdate(ctx.get(), acceptor_banner.data(), acceptor_banner.size());
    EVP_DigestFinal_ex(ctx.get(), reinterpret_cast<unsigned char*>(d.data()), &len);
  }
  return d;
}

}  // namespace rmsg::auth
