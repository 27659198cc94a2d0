#include "session/reassembly.h"

#include "rmsg/messenger_errors.h"

namespace rmsg::session {
namespace {

constexpr auto kBulk = static_cast<std::size_t>(Lane::bulk);

std::error_code bad_fragment() {
  return make_error_code(MessengerErrc::bad_fragment);
}
std::error_code gap() {
  return make_error_code(MessengerErrc::sequence_gap);
}

}  // namespace

Result<void> Reassembler::check_start(const InState& in, Seq seq, std::size_t lane) {
  while (!owed_.empty() && in.is_duplicate(owed_.front())) owed_.pop_front();
  if (!in.within_reach(seq)) return gap();
  if (seq_after(next_new_, seq)) {
    // Below the highest start: only the oldest number the other lane skipped, in its lane.
    if (owed_.empty() || lane != kBulk || owed_.front() != seq) return gap();
    owed_.pop_front();
    return {};
  }
  // Only the priority lane skips numbers (bulk owes them); bulk never skips one that is
  // not a duplicate.
  if (lane == kBulk && !owed_.empty()) return gap();
  for (Seq s = next_new_; s != seq; ++s) {
    if (in.is_duplicate(s)) continue;
    if (lane == kBulk) return gap();
    owed_.push_back(s);
  }
  next_new_ = seq + 1;
  return {};
}

Result<Reassembler::Outcome> Reassembler::feed_slow(const InState& in, Seq seq, std::uint32_t flags,
                                                    std::span<const std::byte> bytes) {
  const std::size_t lane = (flags >> 8) & 0xffu;
  if (lane >= kLanes) return bad_fragment();
  const bool more = (flags & kFlagMoreFragments) != 0;
  Partial& p = partial_[lane];
  whole_ = {};
  if (p.seq != 0 && p.seq != seq) {
    // A message left in pieces may only be a duplicate the sender stopped sending.
    if (!in.is_duplicate(p.seq)) return bad_fragment();
    p = Partial{};
  }
  if (p.seq == 0) {
    // Within a lane numbers start in order, duplicates included: the same number again is
    // a chunk of a message already complete.
    if (seq == last_[lane]) return bad_fragment();
    if (last_[lane] != 0 && seq_after(last_[lane], seq)) return gap();
    last_[lane] = seq;
    if (in.is_duplicate(seq)) {
      if (more) p = Partial{seq, true, {}};
      return more ? Outcome::partial : Outcome::duplicate;
    }
    if (auto r = check_start(in, seq, lane); !r) return r.error();
    if (bytes.size() > max_size_) return bad_fragment();
    if (!more) {
      whole_ = bytes;
      return Outcome::complete;
    }
    p.seq = seq;
    p.duplicate = false;
  }
  if (!p.duplicate) {
    if (bytes.size() > max_size_ - p.buf.size()) return bad_fragment();
    p.buf.insert(p.buf.end(), bytes.begin(), bytes.end());
  }
  if (more) return Outcome::partial;
  const bool dup = p.duplicate || in.is_duplicate(seq);
  done_ = std::move(p.buf);
  p = Partial{};
  if (dup) {
    done_.clear();
    return Outcome::duplicate;
  }
  whole_ = done_;
  return Outcome::complete;
}

}  // namespace rmsg::session
