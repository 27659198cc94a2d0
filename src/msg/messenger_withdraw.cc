// Messenger::Impl::send_tracked (send() too) and withdraw: what RPC needs to keep an expired or
// cancelled request out of a replay (docs/messenger.md, RPC). And the refusals of sends on
// other threads (refused_elsewhere): their SessionEvent::writable, a peer with no session
// included (docs/messenger.md, Flow control).
#include <algorithm>
#include <utility>

#include "msg/messenger_impl.h"

namespace rmsg {

Result<Messenger::Ticket> Messenger::Impl::send_tracked(NodeId peer,
                                                        std::vector<std::byte>&& payload,
                                                        const Messenger::SendOptions& options,
                                                        bool draining_ok) {
  if (peer == 0 || peer == options_.node_id || payload.size() > options_.max_message_size) {
    return make_error_code(Errc::invalid_argument);
  }
  if (shutting_down_ || (drainer_.draining() && !draining_ok)) return make_error_code(Errc::closed);
  Session& s = session_for(peer);
  const Cookie session = s.my_cookie();
  auto r = s.out().push(std::move(payload), static_cast<msg::Lane>(options.lane), options.service);
  if (!r) {
    counters_.counter("msg.send_refused").add_owned();
    return r.error();
  }
  hot_.queued.add_owned();
  // pump() and want_connection() never reset the session synchronously, but the ticket
  // names the session it was queued in either way.
  if (s.connected()) {
    pump(s);
  } else {
    want_connection(s);
  }
  return Messenger::Ticket{session, r.value()};
}

std::optional<Messenger::Ticket> Messenger::Impl::send_reserved(
    NodeId peer, std::vector<std::byte> payload, const Messenger::SendOptions& options) {
  // Accepted during a drain too: its verdict (queued) was given before the drain began.
  if (shutting_down_) {
    admission_->release(peer, payload.size());
    return std::nullopt;
  }
  Session& s = session_for(peer);
  const Messenger::Ticket ticket{
      s.my_cookie(), s.out().push_reserved(std::move(payload), static_cast<msg::Lane>(options.lane),
                                           options.service)};
  hot_.queued.add_owned();
  if (s.connected()) {
    pump(s);
  } else {
    want_connection(s);
  }
  return ticket;
}

void Messenger::Impl::refused_elsewhere(NodeId peer) {
  if (Session* s = find_session(peer)) {
    // Its acks may have made room before the refusal was noted: no later sweep would come.
    if (s->out().take_writable())
      emit(SessionEvent{SessionEvent::Kind::writable, peer, {}, {}, {}});
    return;
  }
  if (std::find(refused_without_session_.begin(), refused_without_session_.end(), peer) ==
      refused_without_session_.end()) {
    refused_without_session_.push_back(peer);
  }
  sweep_refused_without_session();
}

void Messenger::Impl::sweep_refused_without_session() {
  std::erase_if(refused_without_session_, [this](NodeId peer) {
    // A session made meanwhile shares the peer's budget, so its queue ends the episode.
    if (Session* s = find_session(peer)) {
      if (s->out().take_writable()) {
        emit(SessionEvent{SessionEvent::Kind::writable, peer, {}, {}, {}});
      }
      return true;
    }
    msg::QueueBudget& budget = admission_->session(peer);
    if (!budget.refused.load(std::memory_order_acquire)) return true;  // ended elsewhere
    if (!msg::end_episode_with_room(budget, admission_->total())) return false;
    emit(SessionEvent{SessionEvent::Kind::writable, peer, {}, {}, {}});
    return true;
  });
}

void Messenger::Impl::note_total_room() {
  msg::QueueBudget& total = admission_->total();
  if (total.refused_queues.load(std::memory_order_acquire) == 0 || !total.below_half()) return;
  sweep_writable();
  if (total.refused_queues.load(std::memory_order_acquire) != 0 && on_total_room_) {
    on_total_room_();
  }
}

bool Messenger::Impl::withdraw(NodeId peer, Messenger::Ticket ticket) {
  Session* s = find_session(peer);
  if (s == nullptr || s->my_cookie() != ticket.session) return false;
  if (!s->out().withdraw(ticket.seq)) return false;
  counters_.counter("msg.withdrawn").add_owned();
  return true;
}

}  // namespace rmsg
