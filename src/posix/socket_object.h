// What the shim knows about one managed socket (a listener or a connection), shared by every
// descriptor of it in this process (dup, dup2, fcntl(F_DUPFD)). Objects live in one array
// that FdTable maps at start-up and never frees, so a descriptor's object stays valid memory
// even while another thread closes it (the worst a race costs is a miscount).
//
// Everything here is a plain atomic: the data path (counting bytes) and close (freeing)
// take no lock and allocate nothing, so they stay async-signal-safe.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <cstdint>

namespace rmsg::posix {

enum class SocketState : std::uint32_t {
  free = 0,    // slot unused
  fresh,       // socket() done; neither connected nor listening
  listening,   // listen() succeeded
  connecting,  // a non-blocking connect() returned EINPROGRESS
  connected,   // connect() succeeded or accept() made it
};

// Why a connection runs on TCP rather than RDMA (the stats line's "fallback";
// docs/socket-shim.md, "Fallback reasons").
enum class Fallback : std::uint32_t {
  none = 0,   // on RDMA
  not_built,  // this library has no upgrade (a TCP-only build, or no upgrade engine in it)
  policy,     // upgrade off (RMSG_UPGRADE), or this kind of socket is never upgraded
  peer,       // the peer host answered without a shim (CM reject)
  no_device,  // no RDMA device for the address
  loopback,   // a loopback peer: no RDMA there
  address,    // the acceptor found no such connection, or another source address
  binding,    // the proof (nonce at the cut-over offset) did not come: a forged request
  timeout,    // the attempt passed its deadline
  busy,       // a binding already under way, or the rdma_cm port taken
  bypass,     // a call the shim cannot carry on RDMA came first
  version,    // the peer speaks another upgrade version
  pending,    // an attempt is under way
};
inline constexpr std::uint32_t kFallbackReasons = 13;

// Opaque to the shim's core: the upgrade engine's state of one connection (upgrade.h).
struct UpgradeConn;

struct SocketObject {
  std::atomic<SocketState> state{SocketState::free};
  // Descriptors of this process that refer to it; the object is freed at zero.
  std::atomic<std::int32_t> refs{0};
  // The process that reports this connection (its stats line). A child that does I/O on an
  // inherited connection takes it over in its own copy of the table.
  std::atomic<std::int32_t> owner_pid{0};
  // The process's fork count when this process last did I/O on it: when the owner forked
  // since and never touched the connection again, it handed the connection to the child.
  std::atomic<std::uint32_t> io_fork_epoch{0};
  std::atomic<std::uint64_t> bytes_in{0};
  std::atomic<std::uint64_t> bytes_out{0};
  std::atomic<Fallback> fallback{Fallback::not_built};
  // Bytes of bytes_in/bytes_out that went over RDMA, and how long the upgrade took from
  // the TCP connection's establishment to the last direction's cut-over (0: not upgraded).
  std::atomic<std::uint64_t> rdma_bytes_in{0};
  std::atomic<std::uint64_t> rdma_bytes_out{0};
  std::atomic<std::uint64_t> upgrade_us{0};
  std::atomic<bool> on_rdma{false};  // the path that carried the last byte is RDMA
  // Non-null while the upgrade engine handles this connection's data calls.
  std::atomic<UpgradeConn*> upgrade{nullptr};
  // Written before the object is published to a slot (accept) or by the connecting thread
  // (connect); read at report time. A torn read can only garble the stats line's peer.
  sockaddr_in6 peer{};  // sin6_family 0: unknown; AF_INET uses the sockaddr_in prefix
};

}  // namespace rmsg::posix
