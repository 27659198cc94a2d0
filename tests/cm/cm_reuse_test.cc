// Reuse on real verbs: an equal key takes the recycled structure (no new QP, CQ or MR:
// the manager's counters and `rdma res show` agree), a different key builds anew, the pool
// evicts its oldest idle structure, DEVICE_FATAL empties the pool, a failed QP is
// destroyed (or, with the background work, taken apart later and replaced by spares), and
// data on a reused structure arrives byte-exact with fresh credits.
#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <thread>

#include "cm_rdma_fixture.h"
#include "kit/raw_peer.h"
#include "rdma/seams.h"
#include "rdma/wire.h"
#include "verbs/async_events.h"
#include "verbs/seams.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;

class CmReuse : public CmRdmaTest {};

// Leaves bytes unread in flight, then closes both ends abortively.
void close_with_unread_data(EventLoop& loop, Stream& client, Stream& server) {
  std::vector<std::byte> junk(48 * 1024, std::byte{0xEE});
  std::size_t sent = 0;
  loop.run_for(
      [&] {
        auto w = client.write(std::span(junk).subspan(sent));
        if (w) sent += w.value();
        return sent == junk.size() || (!w && !w.is(Errc::would_block));
      },
      5s);
  client.close();
  server.close();
}

TEST_F(CmReuse, SecondConnectWithEqualKeyCreatesNoQpCqOrMr) {
  ASSERT_NO_FATAL_FAILURE(listen_managed(params()));
  std::string why;
  const Census empty = take_census(&why);
  ASSERT_TRUE(empty.ok()) << why;
  Stream c1, s1;
  ConnectReport fresh;
  ASSERT_NO_FATAL_FAILURE(connect_pair(params(), c1, s1, &fresh));
  EXPECT_FALSE(fresh.reused);
  EXPECT_EQ(counter("structures.created"), 2u);  // client and server
  // What a fresh stream holds at this point (its first messages may have spent some).
  const auto fresh_info = rdma_stream_info(c1);
  ASSERT_TRUE(fresh_info.ok());
  ASSERT_NO_FATAL_FAILURE(exchange_exact(c1, s1, 200 * 1024));
  // Open a new pair of streams: EOF both ways was the orderly end; now abort with bytes
  // in flight on fresh streams so the next use must not see them.
  c1.close();
  s1.close();
  const auto t0 = Clock::now();
  ASSERT_TRUE(wait_idle(2)) << "not recycled: idle " << cm().idle() << ", recycling "
                            << cm().recycling();
  std::printf(
      "[ time ] closed to idle (TIMEWAIT_EXIT waited): %lld ms\n",
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count()));
  const Census before = take_census(&why);
  ASSERT_TRUE(before.ok()) << why;
  EXPECT_EQ(before.qp, empty.qp + 2) << before.to_string();

  Stream c2, s2;
  ConnectReport reused;
  ASSERT_NO_FATAL_FAILURE(connect_pair(params(), c2, s2, &reused));
  EXPECT_TRUE(reused.reused);
  const Census after = take_census(&why);
  EXPECT_EQ(after, before) << "before " << before.to_string() << " / after " << after.to_string();
  EXPECT_EQ(counter("structures.created"), 2u);
  EXPECT_EQ(counter("structures.reused"), 2u);
  EXPECT_EQ(counter("structures.recycled"), 2u);
  EXPECT_EQ(static_cast<int>(counter("structures.created") - counter("structures.destroyed")),
            after.qp - empty.qp);
  std::printf("[ phases ] fresh: resolve %lld us, resources %lld us, handshake %lld us\n",
              static_cast<long long>(fresh.resolve.count() / 1000),
              static_cast<long long>(fresh.resources.count() / 1000),
              static_cast<long long>(fresh.handshake.count() / 1000));
  std::printf("[ phases ] reused: resolve %lld us, resources %lld us, handshake %lld us\n",
              static_cast<long long>(reused.resolve.count() / 1000),
              static_cast<long long>(reused.resources.count() / 1000),
              static_cast<long long>(reused.handshake.count() / 1000));

  // Third use, after leaving bytes unread on the second: nothing stale comes through.
  auto info = rdma_stream_info(c2);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->credits, fresh_info->credits) << "credits carried over";
  close_with_unread_data(loop(), c2, s2);
  ASSERT_TRUE(wait_idle(2));
  Stream c3, s3;
  ConnectReport third;
  ASSERT_NO_FATAL_FAILURE(connect_pair(params(), c3, s3, &third));
  EXPECT_TRUE(third.reused);
  auto i3 = rdma_stream_info(s3);
  ASSERT_TRUE(i3.ok());
  EXPECT_EQ(i3->credits, fresh_info->credits);
  std::array<std::byte, 64> buf{};
  EXPECT_TRUE(s3.read(buf).is(Errc::would_block)) << "stale bytes on a reused structure";
  ASSERT_NO_FATAL_FAILURE(exchange_exact(c3, s3, 1 << 20));
  EXPECT_EQ(counter("structures.created"), 2u);
  EXPECT_EQ(counter("structures.stale_completions"), 0u);
  EXPECT_GE(counter("structures.flushed"), 2u * params().rdma.recv_block_count);
}

TEST_F(CmReuse, DifferentKeyBuildsANewStructure) {
  ConnectionManagerOptions o;
  o.wait_timewait = false;
  ASSERT_NO_FATAL_FAILURE(make_manager(o));
  ASSERT_NO_FATAL_FAILURE(listen_managed(params()));
  Stream c1, s1;
  ASSERT_NO_FATAL_FAILURE(connect_pair(params(), c1, s1));
  c1.close();
  s1.close();
  ASSERT_TRUE(wait_idle(2));
  const Census before = take_census();
  ConnectionParams other = params();
  other.rdma.recv_block_count = 12;  // another ring geometry: another key
  Stream c2, s2;
  ConnectReport report;
  ASSERT_NO_FATAL_FAILURE(connect_pair(other, c2, s2, &report));
  EXPECT_FALSE(report.reused);
  EXPECT_EQ(counter("structures.created"), 3u);
  // The server's key is its own geometry and device: its structure is reused.
  EXPECT_EQ(counter("structures.reused"), 1u);
  const Census after = take_census();
  EXPECT_EQ(after.qp, before.qp + 1) << before.to_string() << " -> " << after.to_string();
  EXPECT_EQ(after.cq, before.cq + 2);
  EXPECT_EQ(after.mr, before.mr + 2);
  ASSERT_NO_FATAL_FAILURE(exchange_exact(c2, s2, 100 * 1024));
}

TEST_F(CmReuse, PoolEvictsTheOldestIdleStructureAndFreesIt) {
  ConnectionManagerOptions o;
  o.wait_timewait = false;
  o.max_idle = 1;
  ASSERT_NO_FATAL_FAILURE(make_manager(o));
  // An unpooled server: only client structures enter this manager's pool.
  auto l = rdma_listen(loop(), address(), test_options(),
                       [this](Stream s) { accepted_q_.push_back(std::move(s)); });
  ASSERT_TRUE(l.ok()) << l.error().message();
  peer_ = address();
  peer_.set_port(l->port());
  const Census empty = take_census();
  ConnectionParams a = params();
  ConnectionParams b = params();
  b.rdma.send_block_count = 12;
  Stream c, s;
  ASSERT_NO_FATAL_FAILURE(connect_pair(a, c, s));
  c.close();
  s.close();
  ASSERT_TRUE(wait_idle(1));
  ASSERT_NO_FATAL_FAILURE(connect_pair(b, c, s));
  c.close();
  s.close();
  ASSERT_TRUE(loop().run_for([&] { return counter("structures.evicted") == 1; }, 20s));
  EXPECT_EQ(cm().idle(), 1u);
  const Census now = take_census();
  EXPECT_EQ(now.qp, empty.qp + 1) << "the evicted structure was not freed: " << now.to_string();
  EXPECT_EQ(now.mr, empty.mr + 2);
  // The survivor is the newer (b); a's key builds again.
  ConnectReport ra, rb;
  ASSERT_NO_FATAL_FAILURE(connect_pair(b, c, s, &rb));
  EXPECT_TRUE(rb.reused);
  Stream c2, s2;
  ASSERT_NO_FATAL_FAILURE(connect_pair(a, c2, s2, &ra));
  EXPECT_FALSE(ra.reused);
  EXPECT_EQ(counter("structures.created"), 3u);
  EXPECT_EQ(counter("structures.destroyed"), 1u);
  l->close();
}

// rxe never raises DEVICE_FATAL: the event is routed by hand (verbs::route_async_event).
TEST_F(CmReuse, DeviceFatalDropsPooledStructuresAndTheManagerBuildsAnew) {
  ibv_context* ctx = cm_device_context();
  ASSERT_NE(ctx, nullptr) << "no RDMA device named by RMSG_RDMA_DEVICE";
  ConnectionManagerOptions o;
  o.wait_timewait = false;
  ASSERT_NO_FATAL_FAILURE(make_manager(o));
  ASSERT_NO_FATAL_FAILURE(listen_managed(params()));
  std::string why;
  const Census empty = take_census(&why);
  ASSERT_TRUE(empty.ok()) << why;
  Stream c1, s1;
  ASSERT_NO_FATAL_FAILURE(connect_pair(params(), c1, s1));
  c1.close();
  s1.close();
  ASSERT_TRUE(wait_idle(2));
  ibv_async_event ev{};
  ev.event_type = IBV_EVENT_DEVICE_FATAL;
  verbs::route_async_event(loop(), ctx, ev);
  EXPECT_EQ(cm().idle(), 0u);
  EXPECT_EQ(counter("structures.device_removed"), 2u);
  const Census after = take_census();
  EXPECT_EQ(after.qp, empty.qp) << empty.to_string() << " -> " << after.to_string();
  EXPECT_EQ(after.cq, empty.cq);
  EXPECT_EQ(after.mr, empty.mr);
  // Nothing is cached for the device any more: the next pair is built from scratch.
  Stream c2, s2;
  ConnectReport report;
  ASSERT_NO_FATAL_FAILURE(connect_pair(params(), c2, s2, &report));
  EXPECT_FALSE(report.reused);
  EXPECT_EQ(counter("structures.created"), 4u);
  ASSERT_NO_FATAL_FAILURE(exchange_exact(c2, s2, 100 * 1024));
}

TEST_F(CmReuse, AFailedQpIsDestroyedNotReused) {
  ConnectionManagerOptions o;
  o.wait_timewait = false;
  ASSERT_NO_FATAL_FAILURE(make_manager(o));
  ConnectionParams server = params();
  server.rdma.recv_block_size = 4096;
  ASSERT_NO_FATAL_FAILURE(listen_managed(server));
  const Census empty = take_census();
  RawClient raw;
  std::atomic<int> phase{0};
  std::thread peer([&] {
    rdma::wire::Hello h;
    h.kind = rdma::wire::HelloKind::request;
    h.recv_block_size = 16384;
    h.recv_block_count = 16;
    h.send_block_size = 16384;
    h.send_block_count = 16;
    const auto hello = rdma::wire::encode_hello(h);
    if (raw.connect(peer_, hello) == RDMA_CM_EVENT_ESTABLISHED) {
      raw.send(8192, rdma::wire::encode_imm(rdma::wire::MsgType::data, 0));  // > 4 KiB block
    }
    phase = 1;
    loop().post([] {});
  });
  loop().run_for([&] { return phase == 1; }, 30s);
  peer.join();
  // The oversized SEND can land before the server's ESTABLISHED event: the connection
  // then fails during setup and is never handed to on_accept. Or it lands just after, and
  // the stream is handed over already failed, possibly later than the peer thread ends.
  // Either way its structure must be destroyed, not parked.
  std::optional<Stream> bad;
  bool read_done = false, read_ok = false;
  std::error_code bad_error;
  const bool destroyed = loop().run_for(
      [&] {
        if (!bad && !accepted_q_.empty()) {
          bad.emplace(std::move(accepted_q_.front()));
          accepted_q_.pop_front();
        }
        if (bad && !read_done) {
          std::array<std::byte, 64> buf{};
          auto r = bad->read(buf);
          if (r.is(Errc::would_block)) return false;
          read_done = true;
          read_ok = r.ok();
          if (!r) bad_error = r.error();
          bad->close();
        }
        return counter("structures.not_reusable") == 1;
      },
      30s);
  ASSERT_TRUE(destroyed) << "raw peer: " << raw.error << "; accepted " << bad.has_value()
                         << ", created " << counter("structures.created") << ", destroyed "
                         << counter("structures.destroyed") << ", idle " << cm().idle()
                         << ", recycling " << cm().recycling();
  if (bad) {
    EXPECT_FALSE(read_ok);
    EXPECT_EQ(bad_error.category(), wc_category()) << bad_error.message();
  }
  EXPECT_EQ(counter("structures.not_reusable"), 1u);
  EXPECT_EQ(cm().idle(), 0u);
  EXPECT_EQ(cm().recycling(), 0u);
  EXPECT_EQ(counter("structures.created"), counter("structures.destroyed"));
  const Census now = take_census();
  EXPECT_EQ(now.qp, empty.qp) << now.to_string();
}

// Background work (ConnectionManagerOptions::deferred_teardown, spares): the structure
// of a QP that failed is not destroyed in its close, a spare is built for each side's key
// (the failed client's, and the server's whose peer vanished without a close), the next
// connect takes both from the pool, and the failed QP is gone in the end.
TEST_F(CmReuse, AFailedQpIsTakenApartLaterAndSparesServeTheReconnect) {
  ConnectionManagerOptions o;
  o.deferred_teardown = true;
  o.spares = true;
  ASSERT_NO_FATAL_FAILURE(make_manager(o));
  ASSERT_NO_FATAL_FAILURE(listen_managed(params()));
  std::string why;
  const Census empty = take_census(&why);
  ASSERT_TRUE(empty.ok()) << why;
  Stream c1, s1;
  ASSERT_NO_FATAL_FAILURE(connect_pair(params(), c1, s1));
  ibv_qp* qp = rdma::stream_qp(c1);
  ASSERT_NE(qp, nullptr);
  ibv_async_event ev{};
  ev.event_type = IBV_EVENT_QP_FATAL;
  ev.element.qp = qp;
  verbs::route_async_event(loop(), qp->context, ev);
  EXPECT_TRUE(c1.error()) << "the stream did not fail";
  c1.close();
  // Counted as destroyed at once, but still there: nothing of it is torn down in close().
  EXPECT_EQ(counter("structures.not_reusable"), 1u);
  EXPECT_EQ(counter("structures.deferred_teardowns"), 1u);
  const Census closed = take_census();
  EXPECT_EQ(closed.qp, empty.qp + 2) << closed.to_string();
  std::vector<std::byte> buf(4096);
  ASSERT_TRUE(loop().run_for(
      [&] {
        auto r = s1.read(buf);
        return !r && !r.is(Errc::would_block);
      },
      10s))
      << "the server never saw the disconnect";
  s1.close();
  ASSERT_TRUE(loop().run_for([&] { return counter("structures.spares") == 2; }, 10s))
      << "spares " << counter("structures.spares") << ", failed "
      << counter("structures.spare_failed");
  Stream c2, s2;
  ConnectReport report;
  ASSERT_NO_FATAL_FAILURE(connect_pair(params(), c2, s2, &report));
  EXPECT_TRUE(report.reused);
  EXPECT_EQ(counter("structures.reused"), 2u);
  EXPECT_EQ(counter("structures.created"), 4u);  // the first pair and the two spares
  ASSERT_NO_FATAL_FAILURE(exchange_exact(c2, s2, 100 * 1024));
  // In the end: the new pair and the server's first structure (recycled), not the failed
  // one (its teardown is done by the tick, one object per tick).
  Census end;
  for (int i = 0; i < 20; ++i) {
    loop().run_for([] { return false; }, 250ms);
    end = take_census();
    if (end.qp == empty.qp + 3) break;
  }
  EXPECT_EQ(end.qp, empty.qp + 3) << end.to_string();
}

}  // namespace
}  // namespace rmsg::testing
