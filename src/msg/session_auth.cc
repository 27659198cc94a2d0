// Node authentication in the handshake (docs/security.md; bytes: docs/protocol.md,
// Authentication). With a policy other than off, our banner offers (or requires) feature
// bit 0 and carries our node id and a fresh nonce; when both banners offer it, each side
// sends one auth_proof frame on the peer's banner and checks the peer's before any hello
// is handled: the connector holds its hello until then, the acceptor refuses one that
// comes first. Nothing about the peer (session, budget, counters per node) exists before
// its proof verified; a failure closes the connection with its AuthErrc, counted.
#include <utility>

#include "auth/auth_errors.h"
#include "msg/messenger_impl.h"
#include "msg/vocabulary.h"
#include "rmsg/log.h"

namespace rmsg {

using msg::FrameType;

Result<void> Messenger::Impl::init_auth() {
  if (options_.auth == AuthPolicy::off) return {};
  auto keys = auth::KeyStore::load(options_.auth_key_file, options_.auth_keyring_file);
  if (!keys) return keys.error();
  keys_.emplace(std::move(keys).value());
  return {};
}

std::vector<std::byte> Messenger::Impl::local_banner(Connection& c) {
  msg::Banner b;
  if (keys_) {
    b.supported = msg::kFeatureAuthenticated;
    if (options_.auth == AuthPolicy::require) b.required = msg::kFeatureAuthenticated;
    if (auto r = keys_->refresh(); !r) {  // rotation: keep the keys that loaded last
      RMSG_LOG(error, "msg: node %llx: key files not reloaded: %s",
               static_cast<unsigned long long>(options_.node_id), r.error().message().c_str());
    }
    auto nonce = auth::random_nonce();
    if (nonce) {
      b.auth = msg::BannerAuth{options_.node_id, nonce.value()};
    } else {  // no randomness: offer nothing, so a peer that requires it refuses us
      b.supported = 0;
      b.required = 0;
    }
  }
  auto bytes = msg::encode_banner_ext(b);
  c.auth.reset();
  if (b.auth) {
    const auto role =
        c.role == Connection::Role::outbound ? auth::Role::connector : auth::Role::acceptor;
    const NodeId expected = c.role == Connection::Role::outbound ? c.peer : 0;
    c.auth = std::make_unique<auth::Exchange>(role, options_.node_id, expected, bytes);
  }
  return bytes;
}

bool Messenger::Impl::must_authenticate(NodeId node) const {
  return keys_ && (options_.auth == AuthPolicy::require || keys_->keyring().lists(node));
}

void Messenger::Impl::on_banner(Connection& c) {
  if (c.state() != Connection::State::handshake || !keys_) return;
  const ConnId id = c.id;
  const bool both = (c.decoder->negotiated().features & msg::kFeatureAuthenticated) != 0;
  if (!both || !c.auth) {
    // The peer does not offer it (we only offer: a requirement fails the banners).
    c.auth.reset();
    if (c.role == Connection::Role::inbound) return;  // its hello decides (must_authenticate)
    if (must_authenticate(c.peer)) return fail(id, make_error_code(auth::AuthErrc::not_offered));
  } else {
    auto proof = c.auth->proof(keys_->own(), c.decoder->peer_banner_bytes());
    if (!proof) return fail(id, proof.error());
    c.queue_control(FrameType::auth_proof, proof.value());
    if (c.role == Connection::Role::inbound) return flush(c);
  }
  // The connector's hello, held until now (begin_handshake).
  Session* s = find_session(c.peer);
  if (s == nullptr || s->outbound() != id) return drop(id, false);
  send_hello(c, *s);
}

void Messenger::Impl::on_auth_proof(Connection& c, const msg::Frame& f) {
  const ConnId id = c.id;
  if (!c.auth || c.auth->state() != auth::Exchange::State::proof || f.segment_count() != 1) {
    counters_.counter("msg.auth.refused").add_owned();
    return fail(id,
                make_error_code(!c.auth ? auth::AuthErrc::unexpected : auth::AuthErrc::bad_proof));
  }
  auto who = c.auth->check(f.segment(0), keys_->keyring());
  if (!who) {
    counters_.counter("msg.auth.refused").add_owned();
    RMSG_LOG(info, "msg: node %llx: connection %llu: authentication refused: %s",
             static_cast<unsigned long long>(options_.node_id), static_cast<unsigned long long>(id),
             who.error().message().c_str());
    return fail(id, who.error());
  }
  c.authenticated = who.value();
  c.auth.reset();
  counters_.counter("msg.auth.ok").add_owned();
}

}  // namespace rmsg
