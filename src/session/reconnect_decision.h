// The acceptor's decision on a Hello (client_ident or session_reconnect): pure logic, in
// one documented order (docs/messenger.md, "The decision order"), modelled on msgr2's
// handle_reconnect with its known deadlock fixed (connect_seq bumped on WAIT, ceph#27359).
//
// Sessions are per peer node, and either side may connect ("outbound") while the other
// connects to it: the order below makes every such race end in exactly one connection.
//   1. cookies: no session for the node             -> accept (a new session)
//      Hello.server_cookie set and not our cookie     -> reset (the peer's session is
//                                                        one we do not have: we restarted)
//      we know a peer cookie and Hello's differs:
//        the Hello's cookie is one the peer already replaced -> reset (an abandoned
//                                                        attempt read late; ours stays)
//        the peer starts afresh (server_cookie 0)     -> accept, our old session reset
//        else (a stale attempt)                       -> reset
//   2. global_seq: not above the highest seen from the peer -> retry_global (stale attempt)
//   3. race: our own attempt to the peer is under way: compare connect_seq with ours:
//        higher -> accept (drop ours); lower -> retry (ours); equal -> the lower node id's
//        attempt wins: ours (wait) or theirs (accept, drop ours)
//   4. connect_seq not above the last one established -> retry (the peer catches up)
//   5. accept (replacing any connection the session still has)
// The peer's side: retry -> connect_seq = max(its, the value), try again at once;
// retry_global -> global_seq likewise; wait -> connect_seq = its attempt's (bumped, so its
// next attempt beats an equal one) and it waits for our attempt, trying itself only after
// its longest backoff; reset -> its session is reset and it starts afresh.
//
// Threading: pure.
#pragma once

#include <cstdint>

#include "session/vocabulary.h"
#include "wire/session_frames.h"

namespace rmsg::session {

// What the acceptor knows of its session with the Hello's node.
struct SessionView {
  bool exists = false;
  Cookie my_cookie = 0;
  Cookie peer_cookie = 0;             // 0: not learned yet
  std::uint64_t peer_global_seq = 0;  // highest seen from the peer (0: none)
  std::uint64_t connect_seq = 0;      // of the last connection established
  bool outbound = false;              // our own attempt to the peer is under way
  std::uint64_t outbound_connect_seq = 0;
  // The Hello's client_cookie is one of the peer's earlier cookies, replaced by the
  // current one (Session::retired_peer_cookies): a restarted peer draws a fresh random
  // cookie, so only an attempt abandoned before the replacement can carry it.
  bool client_cookie_retired = false;
};

struct Decision {
  enum class Kind : std::uint8_t { accept, reset, retry, retry_global, wait };
  Kind kind = Kind::reset;
  std::uint64_t value = 0;     // retry: connect_seq; retry_global: global_seq; wait: ours
  bool reset_local = false;    // accept: our session is a dead one; reset it first
  bool drop_outbound = false;  // accept: abandon our own attempt
  const char* why = "";        // for logs and tests
};

Decision decide(const SessionView& s, const Hello& h, NodeId my_node) noexcept;

}  // namespace rmsg::session
