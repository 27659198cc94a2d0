// RawClient: a peer written against rdma-core directly (synchronous rdma_cm, a QP owned by
// librdmacm), for tests that need a peer that breaks the protocol. Blocking: run it on its
// own std::thread while the test's loop thread serves the rmsg side.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "rmsg/address.h"

namespace rmsg::testing {

class RawClient {
 public:
  RawClient() = default;
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;
  ~RawClient();

  // Resolves, connects with `private_data`; returns the CM event that ended the handshake
  // (RDMA_CM_EVENT_ESTABLISHED on success) or -1 on a local error/timeout (see error).
  int connect(const SocketAddress& server, std::span<const std::byte> private_data);
  // Posts one SEND_WITH_IMM of `len` bytes and waits for its completion: the wc status,
  // or -1 on a local error/timeout.
  int send(std::size_t len, std::uint32_t imm_host_order);

  int reject_status = 0;
  std::vector<std::byte> event_data;  // private data of the last handshake event
  std::string error;

 private:
  int wait_event(rdma_cm_event_type* type);

  rdma_event_channel* channel_ = nullptr;
  rdma_cm_id* id_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_mr* mr_ = nullptr;
  std::vector<std::byte> buf_ = std::vector<std::byte>(1 << 20);
  bool connected_ = false;
};

}  // namespace rmsg::testing
