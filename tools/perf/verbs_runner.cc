// The raw-verbs baseline ("verbs"): the perf protocol's lat and bw straight on an RC QP
// (verbs_conn.h), with the completion mode of the rmsg loops (RunOptions::busy_poll).
// The client's WireHeader travels as the connect request's private data; lat: the server
// echoes each message; bw: the server re-posts each receive and, after the last message,
// sends a 1-byte ack.
#include <arpa/inet.h>
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "verbs_conn.h"
#include "wire.h"

namespace rmsg::perf {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kBatch = 32;
constexpr std::uint32_t kWindow = 64;  // bw: sends in flight (signalled every 16th)

std::uint32_t recv_depth_for(const WireHeader& h) {
  if (h.test == static_cast<std::uint32_t>(Test::lat)) return 2;
  if (h.window != 0) return std::clamp<std::uint32_t>(h.window, 2, 256);
  return static_cast<std::uint32_t>(std::clamp<std::uint64_t>((16u << 20) / h.size, 16, 256));
}

void serve(VerbsConn& c, const WireHeader& h) {
  ibv_wc wc[kBatch];
  const bool lat = h.test == static_cast<std::uint32_t>(Test::lat);
  std::uint64_t got = 0, unsignalled = 0;
  while (got < h.count) {
    auto n = c.wait(wc, kBatch);
    if (!n) return;
    for (int i = 0; i < *n; ++i) {
      if (wc[i].opcode != IBV_WC_RECV) continue;
      ++got;
      if (!c.post_recv(static_cast<std::uint32_t>(wc[i].wr_id))) return;
      if (lat) {
        const bool sig = ++unsignalled % 16 == 0;
        if (!c.post_send(h.size, sig)) return;
      }
    }
  }
  if (!lat && !c.post_send(1, true)) return;
  for (;;) {  // until the client hangs up
    if (!c.wait(wc, kBatch)) return;
  }
}

class VerbsServer final : public Server {
 public:
  VerbsServer(rdma_event_channel* ch, rdma_cm_id* id, const RunOptions& o)
      : ch_(ch), id_(id), busy_(o.busy_poll), thread_([this, o] {
          pin_server_thread(o);
          run();
        }) {}
  VerbsServer(const VerbsServer&) = delete;
  VerbsServer& operator=(const VerbsServer&) = delete;
  VerbsServer(VerbsServer&&) = delete;
  VerbsServer& operator=(VerbsServer&&) = delete;
  ~VerbsServer() override {
    stop_.store(true);
    thread_.join();
    rdma_destroy_id(id_);
    rdma_destroy_event_channel(ch_);
  }
  std::uint16_t port() const override { return ntohs(rdma_get_src_port(id_)); }

 private:
  void run() {
    while (!stop_.load()) {
      pollfd p{ch_->fd, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;  // wakes to check stop_
      rdma_cm_event* ev = nullptr;
      if (rdma_get_cm_event(ch_, &ev) != 0) continue;
      if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
        rdma_ack_cm_event(ev);
        continue;
      }
      WireHeader h;
      const bool ok = ev->param.conn.private_data_len >= sizeof h &&
                      (std::memcpy(&h, ev->param.conn.private_data, sizeof h), valid(h));
      rdma_cm_id* id = ev->id;
      rdma_ack_cm_event(ev);
      if (!ok) {
        rdma_reject(id, nullptr, 0);
        rdma_destroy_id(id);
        continue;
      }
      VerbsConn c(busy_, recv_depth_for(h), h.size);
      if (c.accept(id)) serve(c, h);
    }
  }

  rdma_event_channel* ch_;
  rdma_cm_id* id_;
  bool busy_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

Result<Measurement> run_client(VerbsConn& c, const Spec& spec, std::uint64_t total,
                               std::uint32_t window, Progress& progress) {
  const std::uint64_t every = std::clamp<std::uint32_t>(window / 2, 1, 16);  // signalled
  Measurement m;
  m.samples_ns.reserve(spec.iters);
  ibv_wc wc[kBatch];
  auto start = Clock::now(), last = start;
  if (spec.test == Test::lat) {
    for (std::uint64_t i = 0; i < total; ++i) {
      const auto t0 = Clock::now();
      if (i == spec.warmup) start = t0;
      RMSG_TRY(c.post_send(spec.size, (i & 15) == 15));
      for (bool got = false; !got;) {
        auto n = c.wait(wc, kBatch);
        if (!n) return n.error();
        for (int k = 0; k < *n; ++k) {
          if (wc[k].opcode != IBV_WC_RECV) continue;
          got = true;
          RMSG_TRY(c.post_recv(static_cast<std::uint32_t>(wc[k].wr_id)));
        }
      }
      const auto t1 = Clock::now();
      if (i >= spec.warmup) m.samples_ns.push_back(static_cast<double>((t1 - t0).count()) / 2);
      progress.update(i + 1, total);
    }
    m.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
    return m;
  }
  std::uint64_t posted = 0, completed = 0;  // completed: sends known done
  bool acked = false;
  while (posted < total || !acked) {
    while (posted < total && posted - completed < window) {
      const bool sig = (posted % every) == every - 1 || posted + 1 == total;
      RMSG_TRY(c.post_send(spec.size, sig));
      ++posted;
      const auto now = Clock::now();
      if (posted > spec.warmup) m.samples_ns.push_back(static_cast<double>((now - last).count()));
      if (posted == spec.warmup) start = now;
      last = now;
      progress.update(posted, total);
    }
    auto n = c.wait(wc, kBatch);
    if (!n) return n.error();
    for (int k = 0; k < *n; ++k) {
      if (wc[k].opcode == IBV_WC_RECV) acked = true;
      if (wc[k].opcode == IBV_WC_SEND) {
        completed = std::min(posted, (completed / every + 1) * every);
      }
    }
  }
  m.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  return m;
}

class VerbsRunner final : public Runner {
 public:
  // window 0: the baseline's own (kWindow sends in flight, up to 256 receives).
  VerbsRunner(const RunOptions& o, std::uint32_t window) : options_(o), window_(window) {}
  std::string name() const override { return window_ == 0 ? "verbs" : "verbs-window"; }

  Result<std::unique_ptr<Server>> start_server(const SocketAddress& address) override {
    rdma_event_channel* ch = rdma_create_event_channel();
    if (ch == nullptr) return errno_code(errno);
    rdma_cm_id* id = nullptr;
    SocketAddress a = address;
    if (rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP) != 0 ||
        rdma_bind_addr(id, a.sockaddr_ptr()) != 0 || rdma_listen(id, 16) != 0) {
      const int err = errno;
      if (id != nullptr) rdma_destroy_id(id);
      rdma_destroy_event_channel(ch);
      return errno_code(err);
    }
    return std::unique_ptr<Server>(std::make_unique<VerbsServer>(ch, id, options_));
  }

  Result<Measurement> run(const SocketAddress& address, const Spec& spec,
                          Progress& progress) override {
    WireHeader h;
    h.test = static_cast<std::uint32_t>(spec.test);
    h.size = spec.size;
    h.count = spec.warmup + spec.iters;
    h.window = window_;
    VerbsConn c(options_.busy_poll, 2, spec.size);
    RMSG_TRY(c.connect(address, &h, sizeof h));
    return run_client(c, spec, h.count, window_ == 0 ? kWindow : window_, progress);
  }

 private:
  RunOptions options_;
  std::uint32_t window_;
};

std::unique_ptr<Runner> make_verbs(const RunOptions& o) {
  return std::make_unique<VerbsRunner>(o, 0);
}
// The stream's window: as many sends in flight and receives posted as the stream has
// blocks (--blocks, else RdmaOptions' default 8), RNR retries still pacing it.
std::unique_ptr<Runner> make_verbs_window(const RunOptions& o) {
  return std::make_unique<VerbsRunner>(o, o.block_count != 0 ? o.block_count : 8);
}
const bool kRegistered = register_runner("verbs", make_verbs);
const bool kRegisteredWindow = register_runner("verbs-window", make_verbs_window);

}  // namespace
}  // namespace rmsg::perf
