// Two RPC endpoints on one loop: over loopback streams with a manual clock (unit), or over
// killable real streams (TCP on the host). A is the caller, B the server (both can do
// either). Helpers for bodies and collected completions.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kit/seed.h"
#include "msg/killable_streams.h"
#include "msg/msg_harness.h"
#include "rmsg/rpc.h"
#include "rpc/rpc_seams.h"

namespace rmsg::testing {

inline std::vector<std::byte> bytes_of(const std::string& s) {
  std::vector<std::byte> v(s.size());
  std::memcpy(v.data(), s.data(), s.size());
  return v;
}
inline std::string string_of(std::span<const std::byte> b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

// Completions by call id.
struct Completions {
  std::map<CallId, RpcResponse> done;
  RpcEndpoint::CallCallback callback_for(CallId* id_out) {
    return [this, id_out](RpcResponse r) { done[*id_out] = std::move(r); };
  }
};

struct RpcSide {
  std::unique_ptr<RpcEndpoint> ep;
  std::vector<SessionEvent> events;
  KillableStreams* streams = nullptr;  // real streams only; owned by the messenger
  // Loopback only: faults of the connections this side makes and accepts.
  std::shared_ptr<LoopbackFaults> connect_faults = std::make_shared<LoopbackFaults>();
  std::shared_ptr<LoopbackFaults> accept_faults = std::make_shared<LoopbackFaults>();
  std::string address;
  int count(SessionEvent::Kind k) const {
    int n = 0;
    for (const auto& e : events) n += e.kind == k;
    return n;
  }
  std::uint64_t counter(std::string_view name) const { return ep->counters().value(name); }
};

inline RpcOptions rpc_options(NodeId id) {
  RpcOptions o;
  o.messenger.node_id = id;
  o.messenger.handshake_timeout = std::chrono::seconds(1);
  o.messenger.backoff_initial = std::chrono::milliseconds(2);
  o.messenger.backoff_max = std::chrono::milliseconds(100);
  return o;
}

}  // namespace rmsg::testing
