// The per-connection exchange (exchange.h).
#include "auth/exchange.h"

#include "auth/auth_errors.h"

namespace rmsg::auth {

Exchange::Exchange(Role role, NodeId self, NodeId expected, std::span<const std::byte> own_banner)
    : role_(role),
      self_(self),
      expected_(expected),
      own_banner_(own_banner.begin(), own_banner.end()) {}

std::span<const std::byte> Exchange::connector_banner() const noexcept {
  return role_ == Role::connector ? own_banner_ : peer_banner_;
}
std::span<const std::byte> Exchange::acceptor_banner() const noexcept {
  return role_ == Role::acceptor ? own_banner_ : peer_banner_;
}

Result<NodeId> Exchange::fail(std::error_code e) noexcept {
  state_ = State::failed;
  return e;
}

Result<std::array<std::byte, kProofSize>> Exchange::proof(const PrivateKey& key,
                                                          std::span<const std::byte> peer_banner) {
  if (state_ != State::banner) {
    state_ = State::failed;
    return make_error_code(AuthErrc::unexpected);
  }
  peer_banner_.assign(peer_banner.begin(), peer_banner.end());
  Proof p{.node = self_, .peer = expected_, .key = key.public_key(), .signature = {}};
  const Digest d =
      transcript_digest(role_, p.node, p.peer, p.key, connector_banner(), acceptor_banner());
  auto sig = key.sign(d);
  if (!sig) {
    state_ = State::failed;
    return sig.error();
  }
  p.signature = sig.value();
  state_ = State::proof;
  return encode_proof(p);
}

Result<NodeId> Exchange::check(std::span<const std::byte> payload, const Keyring& ring) {
  if (state_ != State::proof) return fail(make_error_code(AuthErrc::unexpected));
  auto p = decode_proof(payload);
  if (!p) return fail(p.error());
  const Proof& q = p.value();
  // Our own id coming back is a reflection; a connector's proof names us as its target;
  // an acceptor's names the node our connect was for, and no target of its own.
  const bool named_right =
      role_ == Role::acceptor ? q.peer == self_ : q.node == expected_ && q.peer == 0;
  if (q.node == self_ || !named_right) return fail(make_error_code(AuthErrc::wrong_peer));
  const Verifier* v = ring.find(q.node, q.key);
  if (v == nullptr) return fail(make_error_code(AuthErrc::unknown_key));
  const Role signer = role_ == Role::acceptor ? Role::connector : Role::acceptor;
  const Digest d =
      transcript_digest(signer, q.node, q.peer, q.key, connector_banner(), acceptor_banner());
  if (!v->verify(d, q.signature)) return fail(make_error_code(AuthErrc::bad_signature));
  peer_ = q.node;
  state_ = State::done;
  own_banner_ = {};
  peer_banner_ = {};
  return q.node;
}

}  // namespace rmsg::auth
