// libFuzzer target: the session half of the messenger handshake (src/msg/session_frames.h,
// src/msg/reconnect_decision.h). Input: an acceptor's session view and node ids (u64 and
// u8 fields, little-endian, missing bytes read as 0), then the bytes of a hello payload.
// Properties (a violation traps):
//   - every payload decoder accepts exactly the inputs at least its layout long, and
//     re-encoding what it decoded gives the same bytes (reserved fields aside);
//   - the decision keeps its order's promises: an accepted reconnect names our cookie, a
//     local reset only for a peer that starts afresh with another cookie, a retry /
//     retry_global whose advice, followed, is not answered with the same advice again
//     (no livelock), a wait only while our own attempt is under way;
//   - both sides deciding on each other's attempt in a race accept exactly one of them.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "session/reconnect_decision.h"
#include "wire/session_frames.h"

namespace {

using namespace rmsg::session;

void check(bool ok) {
  if (!ok) __builtin_trap();
}

class Input {
 public:
  Input(const std::uint8_t* d, std::size_t n) : d_(d), n_(n) {}
  std::uint64_t u64() {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(byte()) << (8 * i);
    return v;
  }
  std::uint8_t byte() { return pos_ < n_ ? d_[pos_++] : 0; }
  std::span<const std::byte> rest() const {
    return {reinterpret_cast<const std::byte*>(d_) + pos_, pos_ < n_ ? n_ - pos_ : 0};
  }

 private:
  const std::uint8_t* d_;
  std::size_t n_;
  std::size_t pos_ = 0;
};

// decode(b) re-encodes to b's first kSize bytes, with the reserved range [r0, r1) zeroed.
template <class T, class Decode>
void round_trip(std::span<const std::byte> b, Decode decode, std::size_t r0, std::size_t r1) {
  auto d = decode(b);
  check(d.ok() == (b.size() >= T::kSize));
  if (!d.ok()) return;
  const auto e = encode(d.value());
  for (std::size_t i = 0; i < T::kSize; ++i) {
    check(e[i] == (i >= r0 && i < r1 ? std::byte{0} : b[i]));
  }
}

void decisions(const SessionView& v, const Hello& h, NodeId me) {
  using K = Decision::Kind;
  const Decision d = decide(v, h, me);
  if (d.kind == K::accept && h.server_cookie != 0) {
    check(v.exists && h.server_cookie == v.my_cookie);
  }
  if (d.reset_local) {
    check(d.kind == K::accept && v.exists && v.peer_cookie != 0 &&
          h.client_cookie != v.peer_cookie && h.server_cookie == 0);
  }
  if (d.drop_outbound) check(d.kind == K::accept && v.outbound);
  if (d.kind == K::wait) check(v.outbound);
  if (d.kind == K::accept && v.exists && !d.reset_local && !v.outbound) {
    check(seq_after(h.connect_seq, v.connect_seq));
  }
  // Follow the advice as the peer would and ask again: never the same advice twice.
  SessionView v2 = v;
  Hello h2 = h;
  if (d.kind == K::retry) {
    v2.peer_global_seq = seq_max(v.peer_global_seq, h.global_seq);
    h2.global_seq = v2.peer_global_seq + 1;
    h2.connect_seq = d.value + 1;
    check(decide(v2, h2, me).kind != K::retry);
  } else if (d.kind == K::retry_global) {
    h2.global_seq = d.value + 1;
    check(decide(v2, h2, me).kind != K::retry_global);
  }
}

void race(NodeId a, NodeId b, std::uint64_t cs_a, std::uint64_t cs_b, std::uint64_t base_cs) {
  if (a == 0 || b == 0 || a == b) return;
  using K = Decision::Kind;
  const SessionView at_a{.exists = true,
                         .my_cookie = 11,
                         .peer_cookie = 22,
                         .peer_global_seq = 1,
                         .connect_seq = base_cs,
                         .outbound = true,
                         .outbound_connect_seq = cs_a};
  const SessionView at_b{.exists = true,
                         .my_cookie = 22,
                         .peer_cookie = 11,
                         .peer_global_seq = 1,
                         .connect_seq = base_cs,
                         .outbound = true,
                         .outbound_connect_seq = cs_b};
  const Hello from_a{
      .node = a, .client_cookie = 11, .server_cookie = 22, .global_seq = 2, .connect_seq = cs_a};
  const Hello from_b{
      .node = b, .client_cookie = 22, .server_cookie = 11, .global_seq = 2, .connect_seq = cs_b};
  const int accepted =
      (decide(at_b, from_a, b).kind == K::accept) + (decide(at_a, from_b, a).kind == K::accept);
  check(accepted == 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Input in(data, size);
  const NodeId me = in.u64();
  SessionView v;
  v.exists = (in.byte() & 1) != 0;
  v.my_cookie = in.u64();
  v.peer_cookie = in.u64();
  v.peer_global_seq = in.u64();
  v.connect_seq = in.u64();
  v.outbound = (in.byte() & 1) != 0;
  v.outbound_connect_seq = in.u64();
  const std::span<const std::byte> payload = in.rest();

  round_trip<Hello>(payload, decode_hello, 60, 64);
  round_trip<Welcome>(payload, decode_welcome, 36, 40);
  round_trip<Value64>(payload, decode_value64, 8, 8);
  round_trip<Reason>(payload, decode_reason, 4, 8);
  round_trip<MessageHeader>(payload, decode_message_header, 22, 24);  // 20..21: service

  if (auto h = decode_hello(payload)) {
    if (!v.exists) v = SessionView{};
    decisions(v, h.value(), me);
    race(me, h->node, v.outbound_connect_seq, h->connect_seq, v.connect_seq);
  }
  return 0;
}
