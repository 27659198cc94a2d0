// ConnectionManagerOptions::max_connections on real verbs (Soft-RoCE guest): connects over
// the limit fail at once, connect requests over it are rejected (the peer sees
// Errc::resource_exhausted), a lingering stream counts until its FIN is acknowledged, and
// released slots serve again. The other side is a plain rdma_listen / rdma_connect on the
// same loop thread, so only the manager under test counts.
#include <gtest/gtest.h>

#include <poll.h>
#include <rdma/rdma_cma.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "cm_rdma_fixture.h"
#include "rdma/wire.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;
namespace wire = rmsg::rdma::wire;

// Connect requests with a valid hello that never complete: each id (on a channel of its
// own, no QP) sends its request and waits for the answer, but never establishes. Blocking:
// run it on a thread of its own while the test's loop serves the listener.
struct HalfOpenFlood {
  struct Request {
    rdma_event_channel* channel = nullptr;
    rdma_cm_id* id = nullptr;
  };
  std::vector<Request> requests;
  int answered = 0;  // RDMA_CM_EVENT_CONNECT_RESPONSE: accepted, a structure built for it
  int rejected = 0;  // RDMA_CM_EVENT_REJECTED with a reject hello of reason `resources`
  std::string error;

  ~HalfOpenFlood() {
    for (auto& r : requests) {
      if (r.id != nullptr) rdma_destroy_id(r.id);
      if (r.channel != nullptr) rdma_destroy_event_channel(r.channel);
    }
  }

  // The next event on r's channel, its type and private data; false after 15 s or an error.
  bool next(Request& r, rdma_cm_event_type& type, std::vector<std::byte>* data = nullptr) {
    pollfd p{r.channel->fd, POLLIN, 0};
    rdma_cm_event* ev = nullptr;
    if (poll(&p, 1, 15000) != 1 || rdma_get_cm_event(r.channel, &ev) != 0) return false;
    type = ev->event;
    if (data != nullptr) {
      const auto* pd = static_cast<const std::byte*>(ev->param.conn.private_data);
      data->assign(pd, pd == nullptr ? pd : pd + ev->param.conn.private_data_len);
    }
    rdma_ack_cm_event(ev);
    return true;
  }

  void run(const SocketAddress& server, int n) {
    wire::Hello h;
    h.kind = wire::HelloKind::request;
    h.recv_block_size = h.send_block_size = 4096;
    h.recv_block_count = h.send_block_count = 4;
    const auto hello = wire::encode_hello(h);
    for (int i = 0; i < n; ++i) {
      Request& r = requests.emplace_back();
      rdma_cm_event_type type{};
      SocketAddress dst = server;
      r.channel = rdma_create_event_channel();
      if (r.channel == nullptr || rdma_create_id(r.channel, &r.id, nullptr, RDMA_PS_TCP) != 0 ||
          rdma_resolve_addr(r.id, nullptr, dst.sockaddr_ptr(), 2000) != 0 || !next(r, type) ||
          type != RDMA_CM_EVENT_ADDR_RESOLVED || rdma_resolve_route(r.id, 2000) != 0 ||
          !next(r, type) || type != RDMA_CM_EVENT_ROUTE_RESOLVED) {
        error = "resolve " + std::to_string(i);
        return;
      }
      rdma_conn_param param{};
      param.private_data = hello.data();
      param.private_data_len = static_cast<std::uint8_t>(hello.size());
      param.responder_resources = param.initiator_depth = 1;
      param.retry_count = 6;
      param.qp_num = 0x100 + static_cast<std::uint32_t>(i);  // no QP: nothing will follow
      std::vector<std::byte> answer;
      if (rdma_connect(r.id, &param) != 0 || !next(r, type, &answer)) {
        error = "connect " + std::to_string(i);
        return;
      }
      if (type == RDMA_CM_EVENT_CONNECT_RESPONSE) {
        ++answered;
      } else if (auto a = wire::decode_hello(answer); type == RDMA_CM_EVENT_REJECTED && a &&
                                                      a->reason == wire::RejectReason::resources) {
        ++rejected;
      } else {
        error = "answer " + std::to_string(i) + ": event " + std::to_string(type);
        return;
      }
    }
  }
};

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

// #15: connect requests in their handshake are capped per listener loop
// (RdmaOptions::max_inbound_handshakes) before anything is built: a flood of requests that
// never complete holds at most the cap's structures, the rest are rejected and counted,
// and a well-behaved client is served once the flood's handshakes time out.
TEST_F(CmLimitRdma, HandshakesOverTheCapAreRejectedBeforeAStructureIsBuilt) {
  ASSERT_NO_FATAL_FAILURE(make_limited(0));
  ConnectionParams server = params();
  server.rdma.max_inbound_handshakes = 4;
  server.rdma.connect_timeout = 3s;
  ASSERT_NO_FATAL_FAILURE(listen_managed(server));
  const auto built = [&] { return counter("structures.created") + counter("structures.reused"); };
  const std::uint64_t built_before = built();
  constexpr int kFlood = 12;
  HalfOpenFlood flood;
  std::atomic<bool> done{false};
  std::thread t([&] {
    flood.run(peer_, kFlood);
    done = true;
    loop().post([] {});
  });
  const bool finished = loop().run_for([&] { return done.load(); }, 120s);
  t.join();
  ASSERT_TRUE(finished);
  ASSERT_TRUE(flood.error.empty()) << flood.error;
  EXPECT_EQ(flood.answered, 4);
  EXPECT_EQ(flood.rejected, kFlood - 4);
  EXPECT_EQ(counter("limit.handshakes_rejected"), static_cast<std::uint64_t>(kFlood - 4));
  EXPECT_LE(built() - built_before, 4u) << "structures built or taken for the flood";
  // A well-behaved client: refused while the flood holds the cap, served once the flood's
  // handshakes expired (connect_timeout); it tries again 100 ms after each refusal.
  std::optional<Result<Stream>> out;
  int refusals = 0;
  std::function<void()> attempt = [&] {
    rdma_connect(loop(), peer_, test_options(), [&](Result<Stream> s) {
      if (s.is(Errc::resource_exhausted)) {
        ++refusals;
        loop().add_timer(100ms, attempt);
        return;
      }
      out.emplace(std::move(s));
    });
  };
  attempt();
  ASSERT_TRUE(loop().run_for([&] { return out.has_value(); }, 30s)) << refusals << " refusals";
  ASSERT_TRUE(out->ok()) << out->error().message();
  ASSERT_TRUE(loop().run_for([&] { return !accepted_q_.empty(); }, 20s));
  EXPECT_GE(refusals, 1) << "the flood never held the cap";
  EXPECT_EQ(counter("limit.handshakes_rejected"),
            static_cast<std::uint64_t>(kFlood - 4 + refusals));
}

}  // namespace
}  // namespace rmsg::testing
