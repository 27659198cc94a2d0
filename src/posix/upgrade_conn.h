// The upgrade engine's state of one connection (docs/socket-shim.md, "The RDMA upgrade").
// Program threads (upgrade_datapath.cc) and the engine's loop thread (upgrade_engine.cc)
// share it under `mu`; the Stream is the loop thread's alone.
#pragma once

#include <netinet/in.h>
#include <sys/epoll.h>

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

// Which descriptor tells the program that one direction is ready: in poll/select (folded
// by calls_readiness.cc) and in every epoll set the program registered the connection in
// (docs/socket-shim.md, "Readiness lives in a shim-owned eventfd"). Moves, under mu, in
// settle_routes() (upgrade_readiness.cc), checked by valid_route_move():
//   input:  tcp --the read side reached its cut-over offset--> engine   (final)
//   output: tcp --program writes held at the offset--> engine --attempt failed--> tcp
enum class Route : std::uint8_t {
  tcp,     // the kernel's socket at the program's number
  engine,  // the engine's eventfd (event_fd: input, room_fd: output); the socket's own
           // events of that direction are taken out of the program's registrations
};

constexpr bool valid_route_move(Route from, Route to, bool input) {
  return from != to && (!input || from == Route::tcp);
}

// One epoll registration of the program's on the connection, as the engine mirrors it.
// The *_mask fields are what the engine last gave the kernel for each entry in the set
// (0: not there), so that a move changes only what it must and can tell, from
// /proc/self/fdinfo, an EPOLLONESHOT entry that fired (disarmed) from one still armed.
struct MirroredReg {
  int epfd = -1;             // the set's number; -1: free
  int fd = -1;               // the program's number it registered
  std::uint32_t events = 0;  // the program's events
  std::uint64_t data = 0;
  std::uint32_t fd_mask = 0;    // the program's number's entry
  std::uint32_t in_mask = 0;    // event_fd's entry, present once input is routed to it
  std::uint32_t room_mask = 0;  // room_fd's entry, present once output is
  bool disarmed = false;        // EPOLLONESHOT fired: nothing reports until the program's MOD
};

struct UpgradeConn {
  bool acceptor = false;
  int tcp_fd = -1;  // the engine's own duplicate of the kernel's socket
  int event_fd = -1;
  // An eventfd that is writable (POLLOUT/EPOLLOUT) exactly while the write side takes
  // bytes: its counter is 0 then, and at its maximum (not writable) while tx is full or
  // writes are held (sync_room()).
  int room_fd = -1;
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
  bool room_blocked = false;  // room_fd's counter is at its maximum
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

  // Readiness: which descriptor carries each direction, and the program's epoll
  // registrations the engine mirrors (more than kMaxSets: the rest see the TCP socket only).
  Route in_route = Route::tcp;
  Route out_route = Route::tcp;
  static constexpr int kMaxSets = 4;
  MirroredReg regs[kMaxSets];

  // Loop thread only.
  Stream stream;
  std::string records;        // record bytes read so far
  bool offered = false;       // connector: OFFER sent
  bool challenged = false;    // connector: CHALLENGE taken; acceptor: CHALLENGE sent
  bool cutover_in = false;    // connector: CUTOVER taken
  bool closing = false;       // the program closed: finish and free
  bool held_at_exit = false;  // exit() closed it for the program: finished, never freed
  WatchId verify_watch{};     // acceptor: at the offset, waiting for the nonce on TCP
  std::size_t nonce_out = 0;  // connector: nonce bytes written into TCP
  WatchId nonce_watch{};      // connector: waiting for TCP room for the rest of the nonce
  WatchId connect_watch{};    // connector: a non-blocking connect() not yet complete
};

// The eventfd: made readable on any change a reader may wait for; drained by a reader
// that finds nothing (under mu).
void signal_readers(UpgradeConn& c);
void drain_signal(UpgradeConn& c);
// The write side's state changed (room freed in tx, cut over, back to TCP): under mu,
// routes and room_fd follow it, and blocked writers wake.
void signal_room(UpgradeConn& c);

// upgrade_readiness.cc, all under mu. settle_routes: moves each direction's readiness to
// where the connection's state says (the connector's read side switches to RDMA here when
// it read up to the offset), re-applying every mirrored registration, and syncs room_fd.
// mirror_ctl: the program's epoll_ctl on number fd of the connection succeeded: the
// registration is recorded (or updated, or forgotten) and applied. unmirror_all: the
// program's last number closes: every entry the engine made or kept leaves its set.
void settle_routes(UpgradeConn& c);
void mirror_ctl(UpgradeConn& c, int epfd, int op, int fd, const epoll_event* ev);
void unmirror_all(UpgradeConn& c);
bool readable_now(const UpgradeConn& c);
bool writable_now(const UpgradeConn& c);

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
