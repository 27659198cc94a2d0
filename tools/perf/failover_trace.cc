#include "failover_trace.h"

#include <algorithm>

#include "rmsg/log.h"

namespace rmsg::perf {
namespace {

constexpr Clock::time_point kUnset{};

double ms(Duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// The offset of `t` from `from` in ms, or "-" when unset.
std::string offset(Clock::time_point t, Clock::time_point from) {
  if (t == kUnset) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.3f", ms(t - from));
  return buf;
}

// The longest gap between consecutive completions whose end lies in [from, to].
double longest_gap_ending_in(const std::vector<Clock::time_point>& done_at, Clock::time_point from,
                             Clock::time_point to) {
  double best = 0;
  for (std::size_t i = 1; i < done_at.size(); ++i) {
    if (done_at[i] < from || done_at[i] > to) continue;
    best = std::max(best, ms(done_at[i] - done_at[i - 1]));
  }
  return best;
}

Clock::time_point first_after(const std::vector<Clock::time_point>& v, Clock::time_point t) {
  auto it = std::upper_bound(v.begin(), v.end(), t);
  return it == v.end() ? kUnset : *it;
}

}  // namespace

FailoverTrace::FailoverTrace() {
  set_log_handler([this](LogLevel, std::string_view m) { add(Clock::now(), std::string(m)); },
                  LogLevel::debug);
}

FailoverTrace::~FailoverTrace() {
  set_log_handler({});
}

void FailoverTrace::add(Clock::time_point at, std::string what) {
  const std::lock_guard lock(mutex_);
  if (marks_.size() < 200000) marks_.push_back({at, std::move(what)});
}

void FailoverTrace::injected(Clock::time_point at) {
  injected_.push_back(at);
  add(at, "perf: QP_FATAL routed to the session's RDMA QP");
}

void FailoverTrace::connect_started(Transport t, Clock::time_point at) {
  connects_.push_back({t, at, kUnset, false});
  add(at, std::string("perf: client connect over ") + to_string(t));
}

void FailoverTrace::connect_done(Transport t, bool ok, Clock::time_point at) {
  for (auto it = connects_.rbegin(); it != connects_.rend(); ++it) {
    if (it->transport == t && it->done == kUnset) {
      it->done = at;
      it->ok = ok;
      break;
    }
  }
  add(at,
      std::string("perf: client ") + to_string(t) + (ok ? " stream connected" : " connect failed"));
}

void FailoverTrace::disconnected(Clock::time_point at) {
  disconnected_.push_back(at);
  add(at, "perf: session event disconnected");
}

void FailoverTrace::switched(Transport to, Clock::time_point at) {
  switched_.emplace_back(to, at);
  add(at, std::string("perf: session event switched to ") + to_string(to));
}

std::vector<FailoverTrace::Switch> FailoverTrace::switches(
    const std::vector<Clock::time_point>& done_at) const {
  std::vector<Switch> out;
  for (std::size_t i = 0; i < injected_.size(); ++i) {
    Switch s;
    s.injected = injected_[i];
    const auto next = i + 1 < injected_.size() ? injected_[i + 1] : Clock::time_point::max();
    for (auto t : disconnected_) {
      if (t >= s.injected && t < next && s.failed == kUnset) s.failed = t;
    }
    for (const auto& [to, t] : switched_) {
      if (t < s.injected || t >= next) continue;
      if (to == Transport::tcp && s.tcp_welcome == kUnset) s.tcp_welcome = t;
      if (to == Transport::rdma && s.tcp_welcome != kUnset && s.rdma_welcome == kUnset) {
        s.rdma_welcome = t;
      }
    }
    for (const auto& c : connects_) {
      if (c.start < s.injected || c.start >= next) continue;
      if (c.transport == Transport::tcp && s.tcp_connect == kUnset) {
        s.tcp_connect = c.start;
        s.tcp_up = c.done;
      }
      // The probe that won: the last RDMA connect that started before the welcome.
      if (c.transport == Transport::rdma && c.ok && s.rdma_welcome != kUnset &&
          c.start < s.rdma_welcome) {
        s.probe = c.start;
        s.probe_up = c.done;
      }
    }
    if (s.tcp_welcome != kUnset) {
      s.tcp_first = first_after(done_at, s.tcp_welcome);
      if (s.tcp_first != kUnset) {
        s.pause_to_tcp_ms = longest_gap_ending_in(done_at, s.injected, s.tcp_first);
      }
    }
    if (s.rdma_welcome != kUnset) {
      s.rdma_first = first_after(done_at, s.rdma_welcome);
      if (s.probe != kUnset && s.rdma_first != kUnset) {
        s.pause_to_rdma_ms =
            longest_gap_ending_in(done_at, s.probe, s.rdma_first + std::chrono::milliseconds(50));
      }
    }
    out.push_back(s);
  }
  return out;
}

void FailoverTrace::print(std::FILE* out, const std::vector<Clock::time_point>& done_at) const {
  const auto all = switches(done_at);
  const std::lock_guard lock(mutex_);
  for (std::size_t i = 0; i < all.size(); ++i) {
    const Switch& s = all[i];
    const auto t0 = s.injected;
    std::fprintf(out,
                 "failover %zu: ms from the QP_FATAL: failed %s, tcp connect %s, tcp up %s, "
                 "tcp welcome %s, first reply %s (pause %.2f ms); probe %s, probe up %s, "
                 "rdma welcome %s, first reply %s (pause %.2f ms)\n",
                 i + 1, offset(s.failed, t0).c_str(), offset(s.tcp_connect, t0).c_str(),
                 offset(s.tcp_up, t0).c_str(), offset(s.tcp_welcome, t0).c_str(),
                 offset(s.tcp_first, t0).c_str(), s.pause_to_tcp_ms, offset(s.probe, t0).c_str(),
                 offset(s.probe_up, t0).c_str(), offset(s.rdma_welcome, t0).c_str(),
                 offset(s.rdma_first, t0).c_str(), s.pause_to_rdma_ms);
    const auto end = (s.rdma_first != kUnset ? s.rdma_first : t0 + std::chrono::seconds(2)) +
                     std::chrono::milliseconds(50);
    // Marks and gaps over 2 ms, merged in time order.
    auto gap = std::lower_bound(done_at.begin(), done_at.end(), t0);
    if (gap != done_at.begin()) --gap;
    auto gaps_until = [&](Clock::time_point limit) {
      for (; gap != done_at.end() && gap + 1 != done_at.end() && *(gap + 1) <= limit; ++gap) {
        if (*(gap + 1) - *gap <= std::chrono::milliseconds(2)) continue;
        std::fprintf(out, "  %10s  .. %s  gap of %.3f ms between completions\n",
                     offset(*gap, t0).c_str(), offset(*(gap + 1), t0).c_str(),
                     ms(*(gap + 1) - *gap));
      }
    };
    for (const Mark& m : marks_) {
      if (m.at < t0 - std::chrono::milliseconds(1) || m.at > end) continue;
      gaps_until(m.at);
      std::fprintf(out, "  %10s  %s\n", offset(m.at, t0).c_str(), m.what.c_str());
    }
    gaps_until(end);
  }
  // The run's longest gap, wherever it is, with what the library logged in it.
  std::size_t worst = 0;
  for (std::size_t i = 1; i < done_at.size(); ++i) {
    if (done_at[i] - done_at[i - 1] > done_at[worst + 1] - done_at[worst]) worst = i - 1;
  }
  if (done_at.size() < 2 || injected_.empty()) return;
  const auto from = done_at[worst], to = done_at[worst + 1];
  const auto t0 = injected_.front();
  std::fprintf(out, "longest gap of the run: %.3f ms, from %s ms after the first QP_FATAL\n",
               ms(to - from), offset(from, t0).c_str());
  for (const Mark& m : marks_) {
    if (m.at >= from - std::chrono::milliseconds(1) && m.at <= to) {
      std::fprintf(out, "  %10s  %s\n", offset(m.at, t0).c_str(), m.what.c_str());
    }
  }
}

}  // namespace rmsg::perf
