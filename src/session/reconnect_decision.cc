#include "session/reconnect_decision.h"

namespace rmsg::session {

Decision decide(const SessionView& s, const Hello& h, NodeId my_node) noexcept {
  using K = Decision::Kind;
  // 1. Cookies: whose session is this?
  if (!s.exists) {
    if (h.server_cookie != 0) return {K::reset, 0, false, false, "no session for that cookie"};
    return {K::accept, 0, false, false, "new session"};
  }
  if (h.server_cookie != 0 && h.server_cookie != s.my_cookie) {
    return {K::reset, 0, false, false, "server cookie is not ours"};
  }
  if (s.peer_cookie != 0 && h.client_cookie != s.peer_cookie) {
    if (s.client_cookie_retired) return {K::reset, 0, false, false, "retired client cookie"};
    if (h.server_cookie == 0) {
      return {K::accept, 0, true, s.outbound, "peer restarted its session"};
    }
    return {K::reset, 0, false, false, "stale client cookie"};
  }
  // 2. global_seq: an attempt older than one already seen was abandoned by its sender.
  if (s.peer_global_seq != 0 && !seq_after(h.global_seq, s.peer_global_seq)) {
    return {K::retry_global, s.peer_global_seq, false, false, "old global_seq"};
  }
  // 3. Both sides connecting at once.
  if (s.outbound) {
    if (seq_after(h.connect_seq, s.outbound_connect_seq)) {
      return {K::accept, 0, false, true, "race: peer's connect_seq higher"};
    }
    if (seq_after(s.outbound_connect_seq, h.connect_seq)) {
      return {K::retry, s.outbound_connect_seq, false, false, "race: ours higher"};
    }
    if (my_node < h.node) return {K::wait, s.outbound_connect_seq, false, false, "race: ours wins"};
    return {K::accept, 0, false, true, "race: theirs wins"};
  }
  // 4. connect_seq: the peer must ask for a connection newer than the last one.
  if (!seq_after(h.connect_seq, s.connect_seq)) {
    return {K::retry, s.connect_seq, false, false, "old connect_seq"};
  }
  // 5.
  return {K::accept, 0, false, false, "reconnect"};
}

}  // namespace rmsg::session
