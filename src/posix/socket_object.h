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

// Why a connection runs on TCP rather than RDMA (the stats line's "fallback").
enum class Fallback : std::uint32_t {
  none = 0,        // on RDMA (not yet possible: issue 19 is the TCP path)
  rdma_not_built,  // this shim has no RDMA upgrade yet: every connection is TCP
};

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
  std::atomic<Fallback> fallback{Fallback::rdma_not_built};
  // Written before the object is published to a slot (accept) or by the connecting thread
  // (connect); read at report time. A torn read can only garble the stats line's peer.
  sockaddr_in6 peer{};  // sin6_family 0: unknown; AF_INET uses the sockaddr_in prefix
};

}  // namespace rmsg::posix
