// ConnectionManagerOptions::max_connections on real verbs (Soft-RoCE guest): connects over
// the limit fail at once, connect requests over it are rejected (the peer sees
// Errc::resource_exhausted), a lingering stream counts until its FIN is acknowledged, and
// released slots serve again. The other side is a plain rdma_listen / rdma_connect on the
// same loop thread, so only the manager under test counts.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <optional>
#include <vector>

#include "cm_rdma_fixture.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;

class CmLimitRdma : public CmRdmaTest {
 protected:
  void make_limited(std::size_t max_connections) {
    ConnectionManagerOptions o;
    o.max_connections = max_connections;
    o.wait_timewait = false;
    make_manager(o);
  }
  // 4 x 4 KiB rings: a peer that does not read stalls a writer after a few blocks.
  static RdmaOptions small_rings() {
    RdmaOptions o = test_options();
    o.send_block_size = o.recv_block_size = 4096;
    o.send_block_count = o.recv_block_count = 4;
    o.linger_timeout = 20s;
    return o;
  }
  // A plain listener (not the manager's); accepted streams land in accepted_.
  void plain_listen(const RdmaOptions& o) {
    auto l =
        rdma_listen(loop(), address(), o, [this](Stream s) { accepted_.push_back(std::move(s)); });
    ASSERT_TRUE(l.ok()) << l.error().message();
    listener_ = std::move(l).value();
    peer_ = address();
    peer_.set_port(listener_.port());
  }
};

TEST_F(CmLimitRdma, ConnectLimitHoldsLingeringCountsAndReleasedSlotsServeAgain) {
  ASSERT_NO_FATAL_FAILURE(make_limited(2));
  ASSERT_NO_FATAL_FAILURE(plain_listen(small_rings()));
  ConnectionParams p = params();
  p.rdma = small_rings();
  auto a = connect_one(p);
  ASSERT_TRUE(a.ok()) << a.error().message();
  auto b = connect_one(p);
  ASSERT_TRUE(b.ok()) << b.error().message();
  EXPECT_EQ(cm().connections(), 2u);
  auto over = connect_one(p);
  EXPECT_EQ(over.error(), make_error_code(ConnectErrc::connection_limit));
  EXPECT_EQ(counter("limit.connects_refused"), 1u);

  // An abortive close gives the slot back at once.
  a.value().close();
  EXPECT_EQ(cm().connections(), 1u);
  auto c = connect_one(p);
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(cm().connections(), 2u);

  // b lingers: its peer reads nothing, so its FIN waits for credits.
  ASSERT_TRUE(loop().run_for([&] { return accepted_.size() == 3; }, 20s));
  Stream b_peer = std::move(accepted_[1]);
  // More than the peer's window and our ring (staged bytes included) can take.
  const auto data = random_bytes(16 * 4096, fresh_seed("limit linger"));
  std::size_t sent = 0;
  ASSERT_TRUE(loop().run_for(
      [&] {
        auto w = b.value().write(std::span(data).subspan(sent));
        if (w) sent += w.value();
        auto info = rdma_stream_info(b.value());  // all but one peer receive hold data
        return !w && w.is(Errc::would_block) && info &&
               info->data_messages_sent + 1 >= info->peer_recv_blocks;
      },
      10s));
  ASSERT_TRUE(b.value().shutdown_write().ok());
  b = Result<Stream>(Errc::closed);  // drops the handle: the loop owns the lingering stream
  loop().run_for([] { return false; }, 100ms);
  EXPECT_EQ(cm().connections(), 2u) << "a lingering stream stopped counting";
  auto during = connect_one(p);
  EXPECT_EQ(during.error(), make_error_code(ConnectErrc::connection_limit));
  // The peer reads: credits come back, the FIN goes out and is acknowledged, the linger ends.
  Reader r(b_peer, 11, 4096);
  ASSERT_TRUE(loop().run_for([&] { return cm().connections() == 1; }, 20s))
      << "the linger never ended (peer read " << r.got.size() << " bytes)";
  EXPECT_TRUE(loop().run_for([&] { return r.eof || static_cast<bool>(r.error); }, 10s));
  EXPECT_TRUE(r.eof) << r.error.message();
  EXPECT_TRUE(r.got.size() == sent && std::equal(r.got.begin(), r.got.end(), data.begin()))
      << "got " << r.got.size() << " of " << sent;
  auto d = connect_one(p);
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ(cm().connections(), 2u);
  EXPECT_EQ(counter("limit.connects_refused"), 2u);
}

TEST_F(CmLimitRdma, ConnectRequestsOverTheLimitAreRejectedAndCounted) {
  ASSERT_NO_FATAL_FAILURE(make_limited(1));
  ASSERT_NO_FATAL_FAILURE(listen_managed(params()));
  const auto plain_connect = [&]() -> Result<Stream> {
    std::optional<Result<Stream>> out;
    rdma_connect(loop(), peer_, test_options(),
                 [&](Result<Stream> s) { out.emplace(std::move(s)); });
    if (!loop().run_for([&] { return out.has_value(); }, 30s)) return Errc::timeout;
    return std::move(*out);
  };
  auto first = plain_connect();
  ASSERT_TRUE(first.ok()) << first.error().message();
  ASSERT_TRUE(loop().run_for([&] { return !accepted_q_.empty(); }, 20s));
  EXPECT_EQ(cm().connections(), 1u);
  auto second = plain_connect();
  EXPECT_TRUE(second.is(Errc::resource_exhausted))
      << (second.ok() ? "connected" : second.error().message());
  EXPECT_EQ(counter("limit.accepts_rejected"), 1u);
  EXPECT_EQ(cm().connections(), 1u);
  // The served stream goes: the next request is accepted.
  accepted_q_.clear();
  EXPECT_EQ(cm().connections(), 0u);
  auto third = plain_connect();
  ASSERT_TRUE(third.ok()) << third.error().message();
  ASSERT_TRUE(loop().run_for([&] { return !accepted_q_.empty(); }, 20s));
  EXPECT_EQ(cm().connections(), 1u);
  EXPECT_EQ(counter("limit.accepts_rejected"), 1u);
}

}  // namespace
}  // namespace rmsg::testing
