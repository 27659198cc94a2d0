// ReuseKey (hash, text), the step-timeout error category, and the manager's counters.
#include <functional>
#include <string>

#include "base/retry_rules.h"
#include "cm/manager_stats.h"
#include "rmsg/connection_manager.h"

namespace rmsg {
namespace {

class ConnectCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "rmsg-connect"; }
  std::string message(int code) const override {
    switch (static_cast<ConnectErrc>(code)) {
      case ConnectErrc::address_timeout:
        return "address resolution timed out";
      case ConnectErrc::route_timeout:
        return "route resolution timed out";
      case ConnectErrc::handshake_timeout:
        return "connection handshake timed out";
      case ConnectErrc::connection_limit:
        return "connection limit reached (max_connections)";
    }
    return "unknown connect error " + std::to_string(code);
  }
  std::error_condition default_error_condition(int code) const noexcept override {
    if (static_cast<ConnectErrc>(code) == ConnectErrc::connection_limit) {
      return std::make_error_condition(std::errc::resource_unavailable_try_again);
    }
    return std::make_error_condition(std::errc::timed_out);
  }
};

void mix(std::size_t& h, std::size_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
}

}  // namespace

const char* to_string(Transport t) noexcept {
  return t == Transport::tcp ? "tcp" : "rdma";
}

const std::error_category& connect_category() noexcept {
  static const ConnectCategory category;
  // Every code: a step deadline of one attempt, or the limit until a connection is released.
  static const bool rule = register_retryable(
      category,
      retry_codes({ConnectErrc::address_timeout, ConnectErrc::route_timeout,
                   ConnectErrc::handshake_timeout, ConnectErrc::connection_limit}),
      [](int code) noexcept {
        if (code == static_cast<int>(ConnectErrc::connection_limit)) return ErrorKind::overloaded;
        return code >= 1 && code <= 3 ? ErrorKind::timeout : ErrorKind::other;
      });
  static_cast<void>(rule);
  return category;
}

ReuseKey ReuseKey::from(const ConnectionParams& p, std::string_view device, std::uint8_t port,
                        bool passive) {
  ReuseKey k;
  k.transport = p.transport;
  k.device = device;
  k.device_port = port;
  if (!passive) k.peer = p.peer;
  const RdmaOptions& o = p.rdma;
  k.send_block_size = o.send_block_size;
  k.send_block_count = o.send_block_count;
  k.recv_block_size = o.recv_block_size;
  k.recv_block_count = o.recv_block_count;
  k.inline_size = o.inline_size;
  k.service_level = p.service_level ? static_cast<std::int16_t>(*p.service_level) : -1;
  k.retry_count = o.retry_count;
  k.rnr_retry_count = o.rnr_retry_count;
  k.ack_timeout = o.ack_timeout;
  k.resolve_timeout_ms = static_cast<std::uint32_t>(o.resolve_timeout.count());
  k.connect_timeout_ms = static_cast<std::uint32_t>(o.connect_timeout.count());
  return k;
}

std::string ReuseKey::to_string() const {
  std::string s = rmsg::to_string(transport);
  s += " " + (device.empty() ? std::string("-") : device) + ":" + std::to_string(device_port);
  s += " peer " + (peer.valid() ? peer.to_string() : std::string("any"));
  s += " send " + std::to_string(send_block_count) + "x" + std::to_string(send_block_size);
  s += " recv " + std::to_string(recv_block_count) + "x" + std::to_string(recv_block_size);
  s += " inline " + std::to_string(inline_size) + " sl " + std::to_string(service_level);
  s += " retry " + std::to_string(retry_count) + "/" + std::to_string(rnr_retry_count) + "/" +
       std::to_string(ack_timeout);
  s += " timeouts " + std::to_string(resolve_timeout_ms) + "/" +
       std::to_string(connect_timeout_ms) + "ms";
  return s;
}

std::size_t ReuseKeyHash::operator()(const ReuseKey& k) const noexcept {
  std::size_t h = std::hash<std::string>{}(k.device);
  // The peer's numeric text: unique per address and port, and the control path only.
  mix(h, std::hash<std::string>{}(k.peer.valid() ? k.peer.to_string() : std::string()));
  for (const std::uint64_t v :
       {std::uint64_t{static_cast<std::uint8_t>(k.transport)}, std::uint64_t{k.device_port},
        std::uint64_t{k.send_block_size}, std::uint64_t{k.send_block_count},
        std::uint64_t{k.recv_block_size}, std::uint64_t{k.recv_block_count},
        std::uint64_t{k.inline_size}, static_cast<std::uint64_t>(k.service_level + 1),
        std::uint64_t{k.retry_count}, std::uint64_t{k.rnr_retry_count},
        std::uint64_t{k.ack_timeout}, std::uint64_t{k.resolve_timeout_ms},
        std::uint64_t{k.connect_timeout_ms}}) {
    mix(h, std::hash<std::uint64_t>{}(v));
  }
  return h;
}

namespace cm {

std::string ManagerStats::cause(std::error_code ec) {
  if (ec.category() == connect_category()) {
    switch (static_cast<ConnectErrc>(ec.value())) {
      case ConnectErrc::address_timeout:
        return "address_timeout";
      case ConnectErrc::route_timeout:
        return "route_timeout";
      case ConnectErrc::handshake_timeout:
        return "handshake_timeout";
      case ConnectErrc::connection_limit:
        return "connection_limit";
    }
  }
  if (ec.category() == error_category()) {
    switch (static_cast<Errc>(ec.value())) {
      case Errc::rejected:
        return "rejected";
      case Errc::connection_refused:
        return "refused";
      case Errc::unreachable:
        return "unreachable";
      case Errc::address_error:
        return "address_error";
      case Errc::route_error:
        return "route_error";
      case Errc::timeout:
        return "timeout";
      case Errc::resource_exhausted:
        return "resources";
      case Errc::protocol_error:
      case Errc::version_mismatch:
        return "protocol";
      case Errc::connection_reset:
        return "reset";
      case Errc::cancelled:
        return "cancelled";
      case Errc::invalid_argument:
        return "invalid_argument";
      default:
        break;
    }
  }
  return "other";
}

void ManagerStats::record(const ConnectReport& r, std::error_code ec) {
  if (ec) {
    add("connects.failed");
    set_.counter("connects.failed." + cause(ec)).add();
    return;
  }
  add("connects.ok");
  const std::string mode =
      std::string("latency.") + rmsg::to_string(r.transport) + (r.reused ? ".reused." : ".fresh.");
  auto us = [](Duration d) {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(d).count());
  };
  set_.counter(mode + "count").add();
  set_.counter(mode + "resolve_us").add(us(r.resolve));
  set_.counter(mode + "resources_us").add(us(r.resources));
  set_.counter(mode + "handshake_us").add(us(r.handshake));
  set_.counter(mode + "total_us").add(us(r.total));
}

}  // namespace cm
}  // namespace rmsg
