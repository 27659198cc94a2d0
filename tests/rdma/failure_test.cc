// Failures the stream must survive cleanly: a peer process killed mid-stream, a peer that
// stops without a word (keepalive + idle timeout), the device's port going down (an
// asynchronous device event), QP_FATAL and DEVICE_FATAL (routed by hand), the device
// removed under a listener and its streams, and a loop destroyed with a connect still in flight.
#include <infiniband/verbs.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>

#include "kit/process_util.h"
#include "kit/rdma_fixture.h"
#include "kit/verbs_census.h"
#include "rdma/seams.h"
#include "verbs/async_events.h"
#include "verbs/seams.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;

class RdmaFailure : public RdmaTest {
 protected:
  // Listens (port 0) and returns the port; accepted streams land in accepted_.
  std::uint16_t listen(const RdmaOptions& o) {
    auto l =
        rdma_listen(loop(), address(), o, [this](Stream s) { accepted_.push_back(std::move(s)); });
    EXPECT_TRUE(l.ok()) << l.error().message();
    if (!l) return 0;
    listener_ = std::move(l).value();
    return listener_.port();
  }
  Stream accept_one() {
    EXPECT_TRUE(loop().run_for([&] { return !accepted_.empty(); }, 60s)) << "nothing connected";
    if (accepted_.empty()) return {};
    Stream s = std::move(accepted_.back());
    accepted_.pop_back();
    return s;
  }
  // Runs the loop until `done` holds (10 s), re-evaluating it every 20 ms.
  bool ticking_until(const std::function<bool()>& done) {
    const TimerId tick = loop().add_periodic(20ms, [] {});
    const bool ok = loop().run_for(done, 10s);
    loop().cancel_timer(tick);
    return ok;
  }
  // Runs the loop until `kind` objects of this process are back to `count` (10 s).
  bool back_to(const char* kind, int count) {
    return ticking_until([&] { return verbs_objects(kind) == count; });
  }
};

TEST_F(RdmaFailure, PeerKilledMidStreamFailsTheSurvivorWithinTheRetryTimeout) {
  const RdmaOptions o = test_options();
  const std::uint16_t port = listen(o);
  ASSERT_NE(port, 0);
  // Baseline after the first bind: the listener's own cm_id is in it.
  std::string why;
  int base[4];
  const char* kinds[4] = {"qp", "cq", "mr", "cm_id"};
  for (int i = 0; i < 4; ++i) {
    base[i] = verbs_objects(kinds[i], &why);
    ASSERT_GE(base[i], 0) << why;
  }
  Child child({helper_path(), "write", address().host(), std::to_string(port)});
  ASSERT_TRUE(child.started());
  Stream s = accept_one();
  ASSERT_TRUE(s.valid());
  Reader r(s, 1, 64 * 1024);
  ASSERT_TRUE(loop().run_for([&] { return r.got.size() >= (1u << 20) || r.error; }, 60s));
  ASSERT_FALSE(r.error) << r.error.message();
  const auto t0 = Clock::now();
  child.signal(SIGKILL);
  ASSERT_TRUE(loop().run_for([&] { return r.error || r.eof; }, 30s)) << "the survivor hangs";
  const auto took = Clock::now() - t0;
  std::printf("survivor failed after %.0f ms: %s (retry bound %.0f ms)\n",
              std::chrono::duration<double, std::milli>(took).count(), r.error.message().c_str(),
              std::chrono::duration<double, std::milli>(retry_bound(o)).count());
  EXPECT_FALSE(r.eof) << "a killed peer is not an orderly end of stream";
  EXPECT_TRUE(r.error == Errc::connection_reset || r.error.category() == wc_category())
      << r.error.message();
  EXPECT_LT(took, retry_bound(o) * 2 + 3s);  // TCG guests are slow: generous slack
  EXPECT_EQ(child.wait(5000), 128 + SIGKILL);
  // The failed stream releases every verbs object once closed.
  s.close();
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(back_to(kinds[i], base[i]))
        << kinds[i] << ": " << verbs_objects(kinds[i]) << " held, baseline " << base[i];
  }
}

// rxe never raises DEVICE_FATAL, so the event is handed to the same routing as one read
// from the device's async fd (verbs::route_async_event); everything after it is real.
TEST_F(RdmaFailure, DeviceFatalFailsEveryStreamOnTheDeviceAndReleasesThem) {
  ibv_context* ctx = cm_device_context();
  ASSERT_NE(ctx, nullptr) << "no RDMA device named by RMSG_RDMA_DEVICE";
  std::string why;
  const Census base = take_census(&why);
  ASSERT_TRUE(base.ok()) << why;
  Stream client, server;
  ASSERT_NO_FATAL_FAILURE(connect_pair(test_options(), test_options(), client, server));
  const auto data = random_bytes(4u << 20, 11);
  Writer w(client, data, 12, 65536, false);
  Reader r(server, 13, 65536);
  ASSERT_TRUE(loop().run_for([&] { return r.got.size() >= (1u << 20) || r.error; }, 60s));
  ASSERT_FALSE(r.error) << r.error.message();
  ibv_async_event ev{};
  ev.event_type = IBV_EVENT_DEVICE_FATAL;
  ev.element.port_num = 0;
  verbs::route_async_event(loop(), ctx, ev);
  ASSERT_TRUE(loop().run_for([&] { return client.error() && server.error(); }, 10s))
      << "a stream outlived its device";
  const auto want = make_async_event_error(IBV_EVENT_DEVICE_FATAL);
  EXPECT_EQ(client.error(), want) << client.error().message();
  EXPECT_EQ(server.error(), want) << server.error().message();
  // 4 MiB through 512 KiB rings with 1 MiB read: the writer was blocked when the device
  // died, and its on_writable must tell it (write() reports an error: readiness holds).
  EXPECT_TRUE(loop().run_for([&] { return w.done || w.error; }, 10s)) << "the writer hangs";
  EXPECT_FALSE(w.done) << "every byte written on a dead device";
  EXPECT_EQ(w.error, want) << w.error.message();
  std::array<std::byte, 8> buf{};
  EXPECT_EQ(client.write(buf).error(), want);
  client.close();
  server.close();
  Census now;
  EXPECT_TRUE(ticking_until([&] {
    now = take_census();
    return now == base;
  })) << "held "
      << now.to_string() << ", baseline " << base.to_string();
}

// QP_FATAL names one QP: only that stream fails (and its peer, which it disconnects);
// another pair on the same device and loop carries on byte-exact.
TEST_F(RdmaFailure, QpFatalFailsOnlyTheStreamOfThatQp) {
  ibv_context* ctx = cm_device_context();
  ASSERT_NE(ctx, nullptr) << "no RDMA device named by RMSG_RDMA_DEVICE";
  Stream c1, s1, c2, s2;
  ASSERT_NO_FATAL_FAILURE(connect_pair(test_options(), test_options(), c1, s1));
  ASSERT_NO_FATAL_FAILURE(connect_pair(test_options(), test_options(), c2, s2));
  ibv_qp* qp = rdma::stream_qp(c1);
  ASSERT_NE(qp, nullptr);
  ibv_async_event ev{};
  ev.event_type = IBV_EVENT_QP_FATAL;
  ev.element.qp = qp;
  verbs::route_async_event(loop(), ctx, ev);
  ASSERT_TRUE(loop().run_for([&] { return c1.error() && s1.error(); }, 10s));
  EXPECT_EQ(c1.error(), make_async_event_error(IBV_EVENT_QP_FATAL)) << c1.error().message();
  EXPECT_EQ(s1.error(), make_error_code(Errc::connection_reset)) << s1.error().message();
  const auto data = random_bytes(2u << 20, 21);
  Writer w(c2, data, 22, 65536, true);
  Reader r(s2, 23, 65536);
  ASSERT_TRUE(loop().run_for([&] { return r.eof || r.error || w.error; }, 60s));
  EXPECT_FALSE(c2.error() || s2.error() || r.error || w.error);
  EXPECT_TRUE(r.got == data);
}

TEST_F(RdmaFailure, StoppedPeerIsDetectedByTheIdleTimeout) {
  RdmaOptions o = test_options();
  o.keepalive_interval = 100ms;
  o.idle_timeout = 1000ms;
  const std::uint16_t port = listen(o);
  ASSERT_NE(port, 0);
  Child child({helper_path(), "idle", address().host(), std::to_string(port), "100"});
  Stream s = accept_one();
  ASSERT_TRUE(s.valid());
  const CounterSet* c = rdma_stream_counters(s);
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(loop().run_for([&] { return c->value("keepalives_received") >= 3; }, 20s))
      << "the idle peer sent no keepalives";
  EXPECT_FALSE(s.error()) << s.error().message();
  // SIGSTOP: its kernel still ACKs at the transport level; only its silence shows.
  child.signal(SIGSTOP);
  const auto t0 = Clock::now();
  ASSERT_TRUE(loop().run_for([&] { return static_cast<bool>(s.error()); }, 20s))
      << "a silent peer was never detected";
  const auto took = Clock::now() - t0;
  std::printf("idle timeout fired after %.0f ms (idle_timeout 1000 ms)\n",
              std::chrono::duration<double, std::milli>(took).count());
  EXPECT_EQ(s.error(), make_error_code(Errc::timeout)) << s.error().message();
  EXPECT_GE(took, 900ms);
  EXPECT_LT(took, 5s);
  EXPECT_EQ(c->value("idle_timeouts"), 1u);
  std::array<std::byte, 8> buf{};
  EXPECT_TRUE(s.read(buf).is(Errc::timeout));
  child.signal(SIGKILL);
}

TEST_F(RdmaFailure, IdleStreamsWithKeepalivesStayUp) {
  RdmaOptions o = test_options();
  o.keepalive_interval = 50ms;
  o.idle_timeout = 300ms;
  Stream client, server;
  ASSERT_NO_FATAL_FAILURE(connect_pair(o, o, client, server));
  // Nothing to send for 2 s: keepalives flow both ways and nobody times out.
  loop().run_for([&] { return client.error() || server.error(); }, 2s);
  ASSERT_FALSE(client.error()) << client.error().message();
  ASSERT_FALSE(server.error()) << server.error().message();
  const auto* cc = rdma_stream_counters(client);
  ASSERT_NE(cc, nullptr);
  EXPECT_GE(cc->value("keepalives_sent"), 10u);
  EXPECT_GE(cc->value("keepalives_received"), 10u);
  // A reader that stops reading holds the peer's credits: no false timeout either.
  const auto data = random_bytes(1u << 20, 7);
  Writer w(client, data, 8, 65536, false);
  loop().run_for([&] { return static_cast<bool>(w.error); }, 2s);
  EXPECT_FALSE(w.done) << "the writer was never pushed back";
  EXPECT_FALSE(client.error()) << client.error().message();
  EXPECT_FALSE(server.error()) << server.error().message();
  // Stalled on credits, the writer probes the peer with zero-length RDMA WRITEs instead
  // (one in flight at a time); they cost the peer nothing it could see.
  EXPECT_GE(cc->value("probes_sent"), 10u);
  EXPECT_EQ(rdma_stream_counters(server)->value("probes_sent"), 0u);
  Reader r(server, 9, 65536);
  ASSERT_TRUE(loop().run_for([&] { return r.got.size() == data.size() || r.error; }, 60s));
  EXPECT_TRUE(r.got == data);
  EXPECT_EQ(rdma_stream_counters(server)->value("idle_timeouts"), 0u);
}

bool port_active() {
  const char* dev = std::getenv("RMSG_RDMA_DEVICE");
  std::ifstream in(std::string("/sys/class/infiniband/") + (dev ? dev : "rxe0") + "/ports/1/state");
  std::string s;
  std::getline(in, s);
  return s.find("ACTIVE") != std::string::npos;
}

// Brings eth0 back up, whatever the test did, and then makes a fresh rxe device: CM
// messages sent while rxe's port is down leave its CM unusable (found here: every later
// connect times out), and later cases share this guest. This process holds no context
// of the device (the streams live in the helper), so the device can be deleted once the
// helper is gone: a helper still running (once under ASan in the guest it had not reported
// 90 s after the link went down) holds a context that the delete would wait for, so it is
// killed once the link is back (a call waiting on the down link can then return).
struct LinkRestorer {
  EventLoop& loop;
  Child& helper;
  void wait_active() {
    const TimerId tick = loop.add_periodic(20ms, [] {});  // re-evaluates the predicate
    EXPECT_TRUE(loop.run_for(port_active, 30s)) << "the rxe port did not come back";
    loop.cancel_timer(tick);
  }
  ~LinkRestorer() {
    EXPECT_EQ(std::system("ip link set eth0 up"), 0);
    wait_active();
    helper.signal(SIGKILL);  // nothing when it exited and was reaped
    helper.wait(30000);
    const char* dev = std::getenv("RMSG_RDMA_DEVICE");
    const std::string name = dev ? dev : "rxe0";
    EXPECT_EQ(std::system(("rdma link delete " + name + " && rdma link add " + name +
                           " type rxe netdev eth0")
                              .c_str()),
              0);
    wait_active();
  }
};

// True when this process has a verbs device open (librdmacm keeps its contexts open).
bool holds_a_device() {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    std::error_code ec2;
    const auto target = std::filesystem::read_symlink(e.path(), ec2).string();
    if (target.rfind("/dev/infiniband/uverbs", 0) == 0) return true;
  }
  return false;
}

TEST_F(RdmaFailure, PortDownFailsTheStreamsWithADeviceEvent) {
  // Re-creating the device waits for every context on it: in a process that used RDMA
  // before (all cases in one process) it would hang. The tier runs each case alone.
  ASSERT_FALSE(holds_a_device()) << "run this case in a process of its own "
                                    "(--gtest_filter=RdmaFailure.PortDown*)";
  Child child({helper_path(), "portdown", address().host(), "0"});
  ASSERT_TRUE(child.started());
  ASSERT_EQ(child.read_line(60000), "connected");
  LinkRestorer restore{loop(), child};
  ASSERT_EQ(std::system("ip link set eth0 down"), 0);
  const std::string result = child.read_line(90000);
  std::printf("helper: %s\n", result.c_str());
  EXPECT_EQ(child.wait(10000), 0) << result;
  EXPECT_NE(result.find("device event: port error"), std::string::npos) << result;
  EXPECT_EQ(result.find("port_error 0"), std::string::npos) << "not counted: " << result;
}

std::string device_name() {
  const char* dev = std::getenv("RMSG_RDMA_DEVICE");
  return dev ? dev : "rxe0";
}

bool device_gone() {
  return !std::filesystem::exists("/sys/class/infiniband/" + device_name());
}

// A second device while the test's device is deleted: librdmacm (rdma-core 44) re-reads its
// device list only while some device remains; with none left it keeps the removed one open
// until the process exits, and a Soft-RoCE device's removal waits that long (found here).
// Afterwards the spare goes and the test's device is made again on eth0, once its removal
// has finished (a delete stuck on a live process completes when that process is killed).
struct SpareDevice {
  EventLoop& loop;
  bool added = false;
  bool deleting = false;  // the test's device is being deleted
  explicit SpareDevice(EventLoop& l) : loop(l) {
    added = std::system(
                "ip link add rmsgspare0 type dummy && ip link set rmsgspare0 up && "
                "rdma link add rxespare type rxe netdev rmsgspare0") == 0;
  }
  ~SpareDevice() {
    const TimerId tick = loop.add_periodic(20ms, [] {});  // re-evaluates the predicates
    if (deleting) {
      EXPECT_TRUE(loop.run_for(device_gone, 60s)) << "the delete never finished";
    }
    EXPECT_EQ(std::system("rdma link delete rxespare; ip link delete rmsgspare0"), 0);
    if (device_gone()) {
      EXPECT_EQ(std::system(("rdma link add " + device_name() + " type rxe netdev eth0").c_str()),
                0);
    }
    EXPECT_TRUE(loop.run_for(port_active, 30s)) << "the rxe port did not come back";
    loop.cancel_timer(tick);
  }
};

TEST_F(RdmaFailure, DeviceRemovalFailsStreamsAndListenerAndReleasesTheDevice) {
  ASSERT_FALSE(holds_a_device()) << "run this case in a process of its own "
                                    "(--gtest_filter=RdmaFailure.DeviceRemoval*)";
  SpareDevice spare{loop()};
  ASSERT_TRUE(spare.added) << "cannot add a spare rxe device on a dummy netdev";
  Child helper({helper_path(), "devremove", address().host(), "0"});
  ASSERT_TRUE(helper.started());
  ASSERT_EQ(helper.read_line(60000), "connected");
  // Bounded: a delete that waits for the helper would block in the kernel (D state,
  // unkillable) until the helper exits; the helper is killed when this case ends.
  const auto t0 = Clock::now();
  spare.deleting = true;
  Child del({"/bin/sh", "-c", "rdma link delete " + device_name() + "; echo rc=$?"});
  ASSERT_TRUE(del.started());
  const std::string deleted = del.read_line(30000);
  const double took = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  const std::string result = helper.read_line(90000);
  std::printf("delete: %s after %.0f ms; helper: %s\n", deleted.c_str(), took, result.c_str());
  EXPECT_EQ(deleted, "rc=0") << "the delete did not complete while the helper lived";
  EXPECT_EQ(helper.wait(10000), 0) << result;
  EXPECT_NE(result.find("listener RDMA device error"), std::string::npos) << result;
}

TEST_F(RdmaFailure, LoopDestroyedWithAConnectInFlightCancelsIt) {
  const std::uint16_t port = listen(test_options());
  ASSERT_NE(port, 0);
  SocketAddress peer = address();
  peer.set_port(port);
  for (const auto head_start : {0ms, 5ms, 30ms}) {
    auto other = EventLoop::create();
    ASSERT_TRUE(other.ok());
    int calls = 0;
    std::error_code err;
    rdma_connect(**other, peer, test_options(), [&](Result<Stream> r) {
      ++calls;
      err = r ? std::error_code{} : r.error();
    });
    (*other)->run_for([] { return false; }, head_start);
    if (calls == 0) {
      other->reset();  // the connect is still in flight
      EXPECT_EQ(calls, 1) << "head start " << head_start.count() << " ms";
      EXPECT_EQ(err, make_error_code(Errc::cancelled)) << err.message();
    }
    loop().run_for([] { return false; }, 50ms);  // the listener sees the other side go
  }
}

}  // namespace
}  // namespace rmsg::testing
