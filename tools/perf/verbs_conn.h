// The raw-verbs baseline's connection: one RC QP set up with librdmacm (synchronous, its
// own event channel), one CQ for sends and receives with a completion channel, one
// registered buffer for receives and one for sends. No stream layer, no flow control
// beyond the device's RNR retries (as perftest's ib_send_bw): what an application would
// write on verbs alone. Completions are waited for the way the rmsg loop does: sleeping
// on the completion channel, or spinning on ibv_poll_cq with busy_poll.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <cstdint>
#include <vector>

#include "rmsg/address.h"
#include "rmsg/result.h"

namespace rmsg::perf {

class VerbsConn {
 public:
  VerbsConn(bool busy_poll, std::uint32_t recv_depth, std::size_t msg_size);
  VerbsConn(const VerbsConn&) = delete;
  VerbsConn& operator=(const VerbsConn&) = delete;
  VerbsConn(VerbsConn&&) = delete;
  VerbsConn& operator=(VerbsConn&&) = delete;
  ~VerbsConn();

  // Active side: resolve, connect with `private_data`, wait for ESTABLISHED.
  Result<void> connect(const SocketAddress& peer, const void* private_data, std::uint8_t len);
  // Passive side, with the CONNECT_REQUEST's id (owned from here on, moved to a channel
  // of its own): build, post every receive, accept, wait for ESTABLISHED.
  Result<void> accept(rdma_cm_id* id);

  // Posts a SEND of `len` bytes from the send buffer (signalled when asked).
  Result<void> post_send(std::size_t len, bool signaled);
  Result<void> post_recv(std::uint32_t slot);
  // Waits for at least one completion and returns them; an error on a failed completion
  // or when the peer disconnected.
  Result<int> wait(ibv_wc* wc, int max);
  std::uint32_t recv_depth() const { return recv_depth_; }

 private:
  Result<void> build(ibv_context* ctx);

  bool busy_;
  std::uint32_t recv_depth_;
  std::size_t size_;
  rdma_event_channel* channel_ = nullptr;  // this connection's own
  bool own_channel_ = false;
  rdma_cm_id* id_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* comp_ = nullptr;
  ibv_cq* cq_ = nullptr;
  std::vector<std::byte> send_buf_, recv_buf_;
  ibv_mr* send_mr_ = nullptr;
  ibv_mr* recv_mr_ = nullptr;
  std::uint32_t inline_ = 0;
  unsigned unacked_ = 0;
  std::uint64_t spins_ = 0;
};

}  // namespace rmsg::perf
