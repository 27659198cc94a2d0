// One connection's authentication exchange, pure (docs/protocol.md, Messenger:
// authentication). After both banners (each with its sender's nonce), each side sends one
// proof and checks the peer's; the connection has an authenticated peer only when check()
// returned its node id. The messenger owns one per connection in its handshake.
//
//   Exchange x(role, my_node, expected_peer, my_banner_bytes);
//   on the peer's banner: send x.proof(my_key, peer_banner_bytes)
//   on the peer's proof frame: x.check(payload, keyring) -> the peer's node id, or why not
//
// Errors (AuthErrc): bad_proof, wrong_peer (the proof names us, or not the node expected,
// or expects another node than us), unknown_key, bad_signature, unexpected (out of turn).
// Threading: the connection's thread.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "auth/keyring.h"
#include "auth/proof.h"
#include "rmsg/result.h"

namespace rmsg::auth {

class Exchange {
 public:
  enum class State : std::uint8_t { banner, proof, done, failed };

  // `expected`: the connector's target (the acceptor's proof must name it); 0 for an
  // acceptor, which learns its peer from the proof.
  Exchange(Role role, NodeId self, NodeId expected, std::span<const std::byte> own_banner);

  // Our proof over both banners (state banner -> proof).
  Result<std::array<std::byte, kProofSize>> proof(const PrivateKey& key,
                                                  std::span<const std::byte> peer_banner);
  // The peer's proof (state proof -> done): the node it authenticated as.
  Result<NodeId> check(std::span<const std::byte> payload, const Keyring& ring);

  State state() const noexcept { return state_; }
  NodeId peer() const noexcept { return peer_; }  // done: the authenticated node

 private:
  std::span<const std::byte> connector_banner() const noexcept;
  std::span<const std::byte> acceptor_banner() const noexcept;
  Result<NodeId> fail(std::error_code e) noexcept;

  Role role_;
  NodeId self_;
  NodeId expected_;
  std::vector<std::byte> own_banner_;
  std::vector<std::byte> peer_banner_;
  State state_ = State::banner;
  NodeId peer_ = 0;
};

}  // namespace rmsg::auth
