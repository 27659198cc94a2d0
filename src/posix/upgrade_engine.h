// The upgrade engine's shared parts (docs/socket-shim.md, "The RDMA upgrade"): its state
// and the steps that both of its sides use. upgrade_engine.cc is the connector, the hooks
// and exit; upgrade_acceptor.cc the rdma_cm listeners and the acceptor's binding.
//
// Threads: the engine's loop thread, but for engine() and engine_on() (any thread) and
// what Engine's comments mark by their locks.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>

#include "base/lease.h"
#include "posix/upgrade_conn.h"
#include "posix/upgrade_wire.h"
#include "rmsg/event_loop.h"
#include "rmsg/rdma.h"
#include "rmsg/stream.h"

namespace rmsg::posix::upg {

namespace wire = upgrade_wire;

// The 4-tuple as the acceptor sees it: (its local end, its peer).
using Key = std::tuple<std::string, std::string>;

struct Engine {
  bool on = false;
  pid_t pid = 0;  // a fork() child has no engine thread: it never upgrades
  std::thread thread;
  std::uint16_t port_offset = 0;
  std::chrono::milliseconds timeout{5000};
  std::unique_ptr<EventLoop> loop;
  std::mutex map_mu;
  std::map<Key, UpgradeConn*> acceptors;  // accepted connections still open, by 4-tuple
  std::list<Listener> listeners;          // loop thread
  std::list<Stream> offers;               // loop thread: accepted streams before their OFFER
  std::set<UpgradeConn*> conns;           // every connection not yet freed (map_mu)
  // Exit waits (bounded) until the peers have every byte: for the connections the program
  // closed to hand their bytes and FIN to their stream (`draining`), and for every stream
  // to be torn down (`streams`: a graceful close ends when the peer's transport
  // acknowledged the FIN, after every byte), as the kernel delivers a closed TCP socket's
  // bytes after the process is gone.
  std::mutex drain_mu;
  std::condition_variable drained;
  int draining = 0;
  // One lease per RDMA stream, held by it until it is torn down (rdma::connect_with,
  // ResourceHooks::admit); each one returned wakes the exit wait.
  LeaseCount streams{[this] {
    std::lock_guard lock(drain_mu);
    drained.notify_all();
  }};
};

// With a monotonic time stamp (ms), as the transport's own lines.
#define UPG_DEBUG(...)                                                    \
  do {                                                                    \
    if (std::getenv("RMSG_UPGRADE_DEBUG")) {                              \
      timespec upg_t{};                                                   \
      clock_gettime(CLOCK_MONOTONIC, &upg_t);                             \
      std::fprintf(stderr, "%ld.%03ld ", static_cast<long>(upg_t.tv_sec), \
                   upg_t.tv_nsec / 1000000);                              \
      std::fprintf(stderr, __VA_ARGS__);                                  \
    }                                                                     \
  } while (0)

Engine* engine();  // the process's engine, made (and its thread started) on first use
// On in this process: a fork() child (no engine thread) and a process past exit() do not
// upgrade.
bool engine_on(Engine* e);
RdmaOptions options();  // of every RDMA stream the engine makes

std::string text(const sockaddr_in6& a);     // "host:port"
std::string host_of(const sockaddr_in6& a);  // "host"
void set_result(UpgradeConn& c, Fallback f);
void stop_verify_watch(UpgradeConn& c);
// The attempt failed before both directions cut over: the connection is exact TCP again.
void fail(UpgradeConn& c, Fallback why);
bool write_all(Stream& s, const std::uint8_t* p, std::size_t n);
void hold_writes(UpgradeConn& c);
void on_stream_readable(UpgradeConn& c);
// The acceptor has read up to the cut-over offset: it looks for the nonce on TCP itself
// (upgrade_acceptor.cc).
void verify_at_cap(UpgradeConn* c);

}  // namespace rmsg::posix::upg
