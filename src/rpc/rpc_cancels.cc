// Cancels that overtake their request (docs/messenger.md, RPC: Cancel). A cancel takes the
// priority lane, so it can arrive before its own large request, still in fragments on the
// bulk lane. The server remembers a cancel it has no request for (per peer, at most
// max_early_cancels ids) and drops that request, unrun and unanswered, when it comes: its
// caller completed the call with RpcErrc::cancelled already.
//
// A remembered id may never be matched: its request was answered before the cancel came
// (the cancel crossed the reply), or withdrawn before it was written (an empty message
// arrives instead). Those are forgotten by
//   - the bound: past max_early_cancels the lowest id goes;
//   - the order of the bulk lane: a caller numbers its calls in increasing order and
//     bulk messages arrive in the order queued, so once a bulk-sized request with a
//     higher id arrived, a lower-id request either came already or is not coming (a
//     small one took the priority lane, ahead of its own cancel). Calls from other
//     threads may queue out of id order: then a cancel can be forgotten early and its
//     request runs, as it would without this table; none is ever dropped wrongly;
//   - a session reset (the peer numbers afresh).
// No request is dropped for a wrong id: call ids are unique within a session, so a
// remembered id matches only its own request, but for a retry (retry_of reuses an id),
// which always runs and clears the entry.
#include <algorithm>

#include "rpc/rpc_impl.h"

namespace rmsg {

void RpcEndpoint::Impl::remember_cancel(PeerCounters& pc, CallId id) {
  const std::size_t max = options_.max_early_cancels;
  if (max == 0) return;
  auto& ids = pc.early_cancels;
  auto it = std::lower_bound(ids.begin(), ids.end(), id);
  if (it != ids.end() && *it == id) return;
  ids.insert(it, id);
  counters_.counter("rpc.server.early_cancels").add();
  if (ids.size() > max) {
    ids.erase(ids.begin());  // the oldest: most likely one whose request came already
    counters_.counter("rpc.server.early_cancels_forgotten").add();
  }
}

bool RpcEndpoint::Impl::cancelled_early(PeerCounters& pc, const rpc::RpcHeader& h,
                                        std::size_t size) {
  auto& ids = pc.early_cancels;
  const bool retry = (h.flags & rpc::kRpcFlagDedupe) != 0;
  const std::size_t f = options_.messenger.fragment_size;
  const bool bulk = f == 0 || rpc::RpcHeader::kSize + size > f;  // as lane_for() picks
  auto it = std::lower_bound(ids.begin(), ids.end(), h.id);
  if (bulk && !retry && it != ids.begin()) {
    // Lower ids are stale (the order of the bulk lane, above).
    counters_.counter("rpc.server.early_cancels_forgotten")
        .add(static_cast<std::uint64_t>(it - ids.begin()));
    it = ids.erase(ids.begin(), it);
  }
  if (it == ids.end() || *it != h.id) return false;
  ids.erase(it);
  if (retry) return false;  // a retry reuses an old id: it runs
  counters_.counter("rpc.server.cancelled_unrun").add();
  return true;
}

}  // namespace rmsg
