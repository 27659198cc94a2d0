// A peer that vanishes without a word, across two guests ("hosts"): run by
// `tests/softroce/run --two-host` (CTest `softroce_two_host`), which starts this binary in
// both guests with RMSG_RDMA_ROLE=server|client.
//
// The client opens three streams, one per liveness mechanism, then takes its own link
// down (`ip link set eth0 down`): from the server's side the peer is simply gone, no DREQ,
// no ACK, nothing. The server must notice on each stream through that stream's own
// configuration:
//   idle   keepalives + idle timeout, ACK timeout long: fails with Errc::timeout
//   ka     keepalives only: the next keepalive is never ACKed: RETRY_EXC_ERR
//   busy   a writer that never stops, keepalives only: RETRY_EXC_ERR, from the sends in
//          flight or, when it was stalled on credits (no keepalive possible), from its
//          window probe (a zero-length RDMA WRITE)
// and every failed stream must give back its verbs objects once closed. The client's own
// streams fail with the device's PORT_ERR event.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>

#include "kit/rdma_fixture.h"
#include "kit/verbs_census.h"
#include "rmsg/rdma.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using Duration = Clock::duration;

constexpr std::uint16_t kBasePort = 18520;
constexpr auto kConnectWindow = 180s;  // the guests boot side by side
constexpr std::size_t kBusyBytesFirst = 4u << 20;
constexpr std::byte kMark{'X'};

enum Kind { kIdle, kKeepalive, kBusy, kKinds };
constexpr std::array<const char*, kKinds> kNames = {"idle", "ka", "busy"};

RdmaOptions options_for(Kind k) {
  RdmaOptions o = test_options();
  o.retry_count = 6;  // rxe retries for ever at 7 (docs/protocol.md, Keepalive)
  switch (k) {
    case kIdle:  // the idle timeout must come long before the retries run out
      o.keepalive_interval = 200ms;
      o.idle_timeout = 1500ms;
      o.ack_timeout = 18;  // ~1.07 s per try, ~7.5 s for all
      break;
    default:  // ka, busy: no idle timeout, only the transport's retries see the peer go
      o.keepalive_interval = 200ms;
      o.idle_timeout = 0ms;
      break;
  }
  return o;
}

double ms(Duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

std::byte pattern(std::uint64_t i) {
  return static_cast<std::byte>(i % 251);
}

// One stream of either side and what the test saw on it.
struct Slot {
  Stream s;
  bool patterned = false;  // busy: every byte read is checked against pattern()
  std::uint64_t in = 0;    // bytes read
  std::uint64_t out = 0;   // bytes written
  bool marked = false;     // idle/ka: the mark went round
  bool corrupt = false;
  std::optional<Clock::time_point> failed_at;
};

void on_error(Slot& slot) {
  if (slot.s.error() && !slot.failed_at) slot.failed_at = Clock::now();
}

// Reads everything; echoes the mark on the server, notes it on the client.
void pump_read(Slot& slot, bool echo) {
  std::array<std::byte, 64 * 1024> buf;
  for (;;) {
    auto n = slot.s.read(buf.data(), buf.size());
    if (!n || *n == 0) return on_error(slot);
    for (std::size_t i = 0; i < *n; ++i) {
      if (!slot.patterned) slot.marked = slot.marked || buf[i] == kMark;
      if (slot.patterned && buf[i] != pattern(slot.in + i)) slot.corrupt = true;
    }
    slot.in += *n;
    if (echo && slot.marked && slot.out == 0) {
      if (slot.s.write(std::span(&kMark, 1))) slot.out = 1;
    }
  }
}

// What each stream saw, for a failure message.
std::string describe(const std::array<Slot, kKinds>& slots) {
  std::ostringstream out;
  for (int k = 0; k < kKinds; ++k) {
    const Slot& s = slots[k];
    out << "\n"
        << kNames[k] << ": error '" << s.s.error().message() << "', in " << s.in << " B, out "
        << s.out << " B;";
    if (const CounterSet* c = rdma_stream_counters(s.s)) c->dump(out, " ");
  }
  return out.str();
}

void pump_write(Slot& slot) {
  std::array<std::byte, 64 * 1024> buf;
  for (;;) {
    for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = pattern(slot.out + i);
    auto n = slot.s.write(buf);
    if (!n) return on_error(slot);
    slot.out += *n;
  }
}

class TwoHosts : public ::testing::Test {
 protected:
  void SetUp() override {
    role_ = env("RMSG_RDMA_ROLE");
    ASSERT_TRUE(role_ == "server" || role_ == "client")
        << "RMSG_RDMA_ROLE='" << role_ << "': run me with tests/softroce/run --two-host";
    auto l = EventLoop::create();
    ASSERT_TRUE(l.ok());
    loop_ = std::move(l).value();
    tick_ = loop_->add_periodic(20ms, [] {});  // re-evaluates run_for's predicates
  }
  void TearDown() override {
    if (loop_) loop_->cancel_timer(tick_);
  }
  static std::string env(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
  }
  SocketAddress addr(const char* var, Kind k) {
    auto a = SocketAddress::from_host_port(env(var), static_cast<std::uint16_t>(kBasePort + k));
    EXPECT_TRUE(a.ok()) << var << ": " << env(var);
    return a ? *a : SocketAddress{};
  }
  bool run_until(const std::function<bool()>& pred, Duration limit) {
    return loop_->run_for(pred, limit);
  }
  // Runs the loop until every stream has failed, noting when each did.
  bool all_fail_within(Duration limit) {
    return run_until(
        [&] {
          bool all = true;
          for (auto& s : slots_) {
            on_error(s);
            all = all && s.failed_at.has_value();
          }
          return all;
        },
        limit);
  }

  void serve();
  void connect_and_vanish();
  std::optional<Stream> connect_retrying(Kind k, Clock::time_point deadline);

  std::string role_;
  std::unique_ptr<EventLoop> loop_;
  TimerId tick_ = 0;
  std::array<Listener, kKinds> listeners_;
  std::array<Slot, kKinds> slots_;
};

void TwoHosts::serve() {
  for (int k = 0; k < kKinds; ++k) {
    auto l = rdma_listen(*loop_, addr("RMSG_RDMA_ADDR", Kind(k)), options_for(Kind(k)),
                         [this, k](Stream s) {
                           Slot& slot = slots_[k];
                           slot.s = std::move(s);
                           if (k == kBusy) {
                             slot.s.on_writable([&slot] { pump_write(slot); });
                           }
                           slot.s.on_readable([&slot] { pump_read(slot, true); });
                         });
    ASSERT_TRUE(l.ok()) << l.error().message();
    listeners_[k] = std::move(l).value();
  }
  std::string why;
  // Baseline after the binds. The client is already knocking: a connect request may hold
  // a cm_id of its own at this point, so the ids are compared with the listeners' count.
  const Census base = take_census(&why);
  const int base_ids = kKinds;
  ASSERT_TRUE(base.ok() && verbs_objects("cm_id", &why) >= base_ids) << why;

  ASSERT_TRUE(run_until([&] { return slots_[kIdle].marked && slots_[kKeepalive].marked; },
                        kConnectWindow + 60s))
      << "the client never got ready";
  // The client takes its link down once both marks came back: from here on it is gone.
  const auto t0 = Clock::now();
  ASSERT_TRUE(all_fail_within(60s)) << "a vanished peer went unnoticed:" << describe(slots_);
  for (int k = 0; k < kKinds; ++k) {
    const CounterSet* c = rdma_stream_counters(slots_[k].s);
    std::printf(
        "server %s: failed %.0f ms after the marks: %s (in %llu B, out %llu B, %llu credit "
        "stalls, %llu probes)\n",
        kNames[k], ms(*slots_[k].failed_at - t0), slots_[k].s.error().message().c_str(),
        static_cast<unsigned long long>(slots_[k].in),
        static_cast<unsigned long long>(slots_[k].out),
        static_cast<unsigned long long>(c ? c->value("credit_stalls") : 0),
        static_cast<unsigned long long>(c ? c->value("probes_sent") : 0));
  }
  const auto retry_exc = make_wc_error(IBV_WC_RETRY_EXC_ERR);
  const RdmaOptions idle = options_for(kIdle), ka = options_for(kKeepalive),
                    busy = options_for(kBusy);
  EXPECT_EQ(slots_[kIdle].s.error(), make_error_code(Errc::timeout));
  EXPECT_EQ(rdma_stream_counters(slots_[kIdle].s)->value("idle_timeouts"), 1u);
  EXPECT_LT(*slots_[kIdle].failed_at - t0, idle.idle_timeout + 2 * idle.keepalive_interval + 5s);
  EXPECT_EQ(slots_[kKeepalive].s.error(), retry_exc);
  EXPECT_LT(*slots_[kKeepalive].failed_at - t0, ka.keepalive_interval + retry_bound(ka) + 5s);
  EXPECT_EQ(slots_[kBusy].s.error(), retry_exc) << slots_[kBusy].s.error().message();
  EXPECT_LT(*slots_[kBusy].failed_at - t0, busy.keepalive_interval + retry_bound(busy) + 5s);
  EXPECT_GE(slots_[kBusy].out, kBusyBytesFirst);

  for (auto& s : slots_) s.s.close();
  Census now;
  int ids = -1;
  const bool released = run_until(
      [&] {
        now = take_census();
        ids = verbs_objects("cm_id");
        return now == base && ids == base_ids;
      },
      20s);
  EXPECT_TRUE(released) << "held " << now.to_string() << " and " << ids << " cm_ids, baseline "
                        << base.to_string() << " and " << base_ids;
}

std::optional<Stream> TwoHosts::connect_retrying(Kind k, Clock::time_point deadline) {
  const SocketAddress peer = addr("RMSG_RDMA_PEER_ADDR", k);
  int attempts = 0;
  while (Clock::now() < deadline) {
    ++attempts;
    std::optional<Result<Stream>> r;
    rdma_connect(*loop_, peer, options_for(k), [&](Result<Stream> s) { r.emplace(std::move(s)); });
    run_until([&] { return r.has_value(); }, 30s);
    if (r && r->ok()) {
      std::printf("client %s: connected after %d attempts\n", kNames[k], attempts);
      return std::move(*r).value();
    }
    run_until([] { return false; }, 100ms);  // the server is not up yet: try again shortly
  }
  ADD_FAILURE() << kNames[k] << ": no connection within the window";
  return std::nullopt;
}

void TwoHosts::connect_and_vanish() {
  const auto deadline = Clock::now() + kConnectWindow;
  for (int k = 0; k < kKinds; ++k) {
    auto s = connect_retrying(Kind(k), deadline);
    ASSERT_TRUE(s);
    Slot& slot = slots_[k];
    slot.s = std::move(*s);
    slot.patterned = k == kBusy;
    slot.s.on_readable([&slot] { pump_read(slot, false); });
  }
  ASSERT_TRUE(run_until([&] { return slots_[kBusy].in >= kBusyBytesFirst; }, 120s))
      << "busy stream: " << slots_[kBusy].in << " bytes";
  for (Kind k : {kIdle, kKeepalive}) ASSERT_TRUE(slots_[k].s.write(std::span(&kMark, 1)).ok());
  ASSERT_TRUE(run_until([&] { return slots_[kIdle].marked && slots_[kKeepalive].marked; }, 30s));
  EXPECT_FALSE(slots_[kBusy].corrupt);
  for (auto& s : slots_) EXPECT_FALSE(s.s.error()) << s.s.error().message();

  ASSERT_EQ(std::system("ip link set eth0 down"), 0);
  const auto t0 = Clock::now();
  ASSERT_TRUE(all_fail_within(60s)) << describe(slots_);
  // rxe fails a send on a down port with LOC_QP_OP_ERR; the PORT_ERR event, read from the
  // device's async fd on the loop, then replaces it as the cause (docs/protocol.md, Device
  // events). On a loaded host the event can come a few loop turns after the completion.
  const auto port_err = make_async_event_error(IBV_EVENT_PORT_ERR);
  run_until(
      [&] {
        for (auto& s : slots_) {
          if (s.s.error() != port_err) return false;
        }
        return true;
      },
      10s);
  for (int k = 0; k < kKinds; ++k) {
    std::printf("client %s: failed %.0f ms after the link went down: %s\n", kNames[k],
                ms(*slots_[k].failed_at - t0), slots_[k].s.error().message().c_str());
    EXPECT_EQ(slots_[k].s.error(), port_err);
  }
  // The link comes back before the streams go: on rxe, destroying a cm_id whose DREQ
  // cannot leave a down link blocked rdma_destroy_id in the kernel for minutes
  // (cm_destroy_id_wait_timeout, state DREQ_SENT; once in ~10 runs, tests/softroce/README).
  ASSERT_EQ(std::system("ip link set eth0 up"), 0);
  for (auto& s : slots_) s.s.close();
}

TEST_F(TwoHosts, VanishedPeerIsDetectedByEachStreamsOwnTimers) {
  if (role_ == "server") {
    serve();
  } else {
    connect_and_vanish();
  }
}

}  // namespace
}  // namespace rmsg::testing
