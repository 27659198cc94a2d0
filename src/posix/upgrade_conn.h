// The upgrade engine's state of one connection (docs/socket-shim.md, "The RDMA upgrade").
// Program threads (upgrade_datapath.cc) and the engine's loop thread (upgrade_engine.cc)
// share it under `mu`; the Stream is the loop thread's alone.
#pragma once

#include <netinet/in.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <mutex>
#include <string>

#include "posix/real.h"
#include "posix/socket_object.h"
#include "posix/upgrade_wire.h"
#include "rmsg/stream.h"

namespace rmsg::posix {

inline constexpr std::uint64_t kNoCap = std::numeric_limits<std::uint64_t>::max();
inline constexpr std::size_t kBufferCap = 256 * 1024;  // each of rx and tx

// Where program writes go.
enum class WriteMode {
  tcp,   // the kernel's socket (before cut-over, or after a fallback)
  hold,  // stopped at the cut-over offset while the binding completes
  rdma,  // the send buffer, flushed into the RDMA stream by the loop
};

struct UpgradeConn {
  bool acceptor = false;
  int tcp_fd = -1;  // the engine's own duplicate of the kernel's socket
  int event_fd = -1;
  int room_fd = -1;  // an eventfd made readable when room frees in tx for a poller
  sockaddr_in6 local{};
  sockaddr_in6 peer{};
  std::chrono::steady_clock::time_point started;

  std::mutex mu;
  std::condition_variable cv;   // state changes, buffer space, data
  SocketObject* obj = nullptr;  // null once the program closed it
  Fallback result = Fallback::pending;

  // Write side.
  WriteMode wmode = WriteMode::tcp;
  int tcp_writers = 0;        // program writes inside the kernel's call now
  bool hold_waiting = false;  // the loop waits for tcp_writers to reach 0
  std::uint64_t tcp_out = 0;  // program bytes written into TCP
  std::string tx;             // program bytes for the RDMA stream
  bool flush_posted = false;
  bool want_room = false;     // a poller waits for room in tx: signal when some frees
  bool shut_wr = false;       // the program shut its write side down
  bool write_failed = false;  // the RDMA stream failed or the peer reset: EPIPE

  // Read side.
  std::uint64_t tcp_in = 0;         // program bytes read from TCP
  std::uint64_t read_cap = kNoCap;  // TCP bytes the program may read (the cut-over offset)
  int tcp_readers = 0;              // program reads inside the kernel's call now (no cap
                                    // may be set under them: they may read past it)
  bool read_rdma = false;           // TCP is done: reads come from rx
  bool verify_nonce = false;        // acceptor: the nonce must follow at read_cap
  upgrade_wire::Nonce nonce{};      // the binding's nonce (acceptor: made; connector: received)
  std::string rx;                   // RDMA bytes the program has not read
  bool rx_eof = false;
  int rx_error = 0;
  bool rx_paused = false;  // the loop stopped reading the stream: rx is full

  // epoll sets the program registered the connection in (their numbers), so that the
  // engine's eventfd follows its registrations and leaves with the connection.
  static constexpr int kMaxSets = 4;
  int epoll_sets[kMaxSets] = {-1, -1, -1, -1};

  // Loop thread only.
  Stream stream;
  std::string records;        // record bytes read so far
  bool offered = false;       // connector: OFFER sent
  bool challenged = false;    // connector: CHALLENGE taken; acceptor: CHALLENGE sent
  bool cutover_in = false;    // connector: CUTOVER taken
  bool closing = false;       // the program closed: finish and free
  WatchId verify_watch{};     // acceptor: at the offset, waiting for the nonce on TCP
  std::size_t nonce_out = 0;  // connector: nonce bytes written into TCP
  WatchId nonce_watch{};      // connector: waiting for TCP room for the rest of the nonce
  WatchId connect_watch{};    // connector: a non-blocking connect() not yet complete
};

// The eventfd: made readable on any change a reader may wait for; drained by a reader
// that finds nothing (under mu).
void signal_readers(UpgradeConn& c);
void drain_signal(UpgradeConn& c);
// room_fd: made readable (under mu) when a poller waits for room and the write side may
// take bytes again: room freed in tx, the write side cut over or went back to TCP.
void signal_room(UpgradeConn& c);

// Loop-side entry points the data path posts to (upgrade_engine.cc).
void post_flush(UpgradeConn& c);                   // tx has bytes, or shut_wr was set
void post_writers_left(UpgradeConn& c);            // tcp_writers reached 0 while hold_waiting
void post_nonce_seen(UpgradeConn& c, bool match);  // acceptor: the nonce came (or did not)
void post_at_cap(UpgradeConn& c);                  // acceptor: the program read up to the offset

// Acceptor at the cut-over offset, under mu: are the next TCP bytes the nonce? 1: they
// were, consumed, reads now come from RDMA; 0: not all there yet; -1: they are not (or end
// of stream): refused, the cap lifted, nothing consumed.
int nonce_verdict(UpgradeConn& c);
void post_resume_reading(UpgradeConn& c);  // rx drained below half

// The C library's calls the engine makes on the connection's sockets and its eventfd:
// never the shim's own entry points (in the preload those are the program's names, and a
// managed number would lead back into the engine). In-process: &g_real; in the preload's
// module: the preload's g_real, handed over at load.
extern const RealCalls* g_engine_real;

// Tests only (tests/posix): called by a program's TCP read after it computed its limit
// and released the connection's lock, just before the kernel's call.
extern std::atomic<void (*)()> g_tcp_read_window;

// The hooks (upgrade.h): the data path's table, and the engine's entry points in it.
struct UpgradeHooks;
extern const UpgradeHooks kUpgradeHooks;
void upgrade_listening(int fd, SocketObject& o);
void upgrade_established(int fd, SocketObject& o, bool acceptor);
void upgrade_connecting(int fd, SocketObject& o);
void upgrade_closed(UpgradeConn& c, SocketObject& o);

}  // namespace rmsg::posix
