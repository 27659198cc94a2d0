// The authentication proof (docs/protocol.md, Messenger: authentication): the transcript
// digest each side signs and the proof frame's payload that carries the signature.
//
// Transcript (SHA-256), every integer little-endian:
//   "rmsg-auth-1" (11 ASCII bytes) | u8 role of the signer (1 connector, 2 acceptor)
//   | u64 signer's node id | u64 the node the signer expects (connector: its target;
//   acceptor: 0) | the signer's public key (32) | u16 length + the connector's banner
//   | u16 length + the acceptor's banner  (each banner every byte as sent, CRC included)
// Each banner carries its sender's fresh nonce, so a proof is worth one connection
// (replay), one direction (the role: reflection), and one pair of banners (splice).
//
// Proof payload, 112 bytes: u64 node | u64 peer | public key (32) | signature (64).
//
// Threading: any thread; pure functions (digest uses libcrypto, no shared state).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "auth/keys.h"
#include "rmsg/result.h"

namespace rmsg::auth {

enum class Role : std::uint8_t { connector = 1, acceptor = 2 };

inline constexpr std::size_t kProofSize = 112;
using Digest = std::array<std::byte, 32>;

struct Proof {
  std::uint64_t node = 0;  // the signer
  std::uint64_t peer = 0;  // whom the signer expects (0: any)
  PublicKey key{};
  Signature signature{};
};

std::array<std::byte, kProofSize> encode_proof(const Proof& p) noexcept;
// AuthErrc::bad_proof unless exactly kProofSize bytes with a node id other than 0.
Result<Proof> decode_proof(std::span<const std::byte> payload) noexcept;

Digest transcript_digest(Role signer, std::uint64_t node, std::uint64_t peer, const PublicKey& key,
                         std::span<const std::byte> connector_banner,
                         std::span<const std::byte> acceptor_banner) noexcept;

}  // namespace rmsg::auth
