// cm_devremove_helper ADDR DEVICE [idle]: the process side of CmDeviceRemoval
// (cm_devremove_test.cc). A device can only be deleted while no process holds it open, so the
// manager lives here, not in the test's process.
//
//   1. A ConnectionManager (and its managed listener) on ADDR: three connections made and
//      closed, so six structures (both sides) are parked idle; one more connection made and
//      kept open (it reuses two). Prints "connected ..." and waits. With `idle`, no
//      connection is kept and the listener is closed: nothing but the pool's own sentinel id
//      is left on the device to hear of the removal.
//   2. The test deletes DEVICE. The open pair must fail (device_error, or connection_reset
//      when the peer's failure came first), every pooled structure must go
//      (structures.device_removed), the process must hold no file of the removed device and
//      no verbs object (`rdma res show`), and the device must disappear while this process
//      lives. Prints "removed ..." with what it saw.
//   3. The test makes DEVICE again. Through the same manager, a new listener and a new
//      connection must work on fresh structures (never reused from the old device). Prints
//      "reconnected ...".
// Exit status: 0 as above, 2 usage, 3 setup failed, 5 phase 2 failed, 6 phase 3 failed.
#include <infiniband/verbs.h>

#include <chrono>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "kit/verbs_census.h"
#include "rmsg/connection_manager.h"
#include "rmsg/event_loop.h"
#include "rmsg/log.h"

namespace {

using namespace std::chrono_literals;
using rmsg::ConnectionManager;
using rmsg::Result;
using rmsg::Stream;

constexpr int kParked = 3;  // connections made and closed before the removal

// Files of removed verbs devices ("/dev/infiniband/uverbsN (deleted)") this process holds:
// a Soft-RoCE device's removal waits until there are none.
int removed_device_files() {
  int n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    std::error_code ec2;
    const auto target = std::filesystem::read_symlink(e.path(), ec2).string();
    if (target.starts_with("/dev/infiniband/uverbs") && target.ends_with(" (deleted)")) ++n;
  }
  return n;
}

bool port_active(const std::string& device) {
  std::ifstream in("/sys/class/infiniband/" + device + "/ports/1/state");
  std::string s;
  std::getline(in, s);
  return s.find("ACTIVE") != std::string::npos;
}

double ms_since(rmsg::Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(rmsg::Clock::now() - t0).count();
}

void say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

class Helper {
 public:
  Helper(rmsg::EventLoop& loop, ConnectionManager& cm, rmsg::SocketAddress address,
         std::string device)
      : loop_(loop), cm_(cm), address_(address), device_(std::move(device)) {}

  bool listen();
  // `n` connections at once; the client and server streams land in clients_/servers_.
  bool connect(int n, bool* any_reused = nullptr);
  bool park();
  void close_listener() { listener_.close(); }
  int after_removal(std::uint64_t parked);
  int after_recreate();

 private:
  std::uint64_t counter(const char* name) const { return cm_.counters().value(name); }
  rmsg::ConnectionParams params() const {
    rmsg::ConnectionParams p;
    p.transport = rmsg::Transport::rdma;
    p.peer = peer_;
    return p;
  }

  rmsg::EventLoop& loop_;
  ConnectionManager& cm_;
  rmsg::SocketAddress address_;
  rmsg::SocketAddress peer_;
  std::string device_;
  rmsg::Listener listener_;
  std::deque<Stream> clients_;
  std::deque<Stream> servers_;
};

bool Helper::listen() {
  auto l = cm_.listen(address_, params(), [this](Stream s) { servers_.push_back(std::move(s)); });
  if (!l) {
    std::fprintf(stderr, "listen: %s\n", l.error().message().c_str());
    return false;
  }
  listener_ = std::move(l).value();
  peer_ = address_;
  peer_.set_port(listener_.port());
  return true;
}

bool Helper::connect(int n, bool* any_reused) {
  const std::size_t servers = servers_.size() + static_cast<std::size_t>(n);
  int done = 0;
  bool failed = false;
  for (int i = 0; i < n; ++i) {
    cm_.connect(params(), [&, any_reused](Result<Stream> r, const rmsg::ConnectReport& how) {
      ++done;
      if (!r) {
        std::fprintf(stderr, "connect: %s\n", r.error().message().c_str());
        failed = true;
        return;
      }
      if (any_reused != nullptr && how.reused) *any_reused = true;
      clients_.push_back(std::move(r).value());
    });
  }
  return loop_.run_for([&] { return (done == n && servers_.size() >= servers) || failed; }, 60s) &&
         !failed;
}

// kParked connections made and closed (both sides), then parked idle.
bool Helper::park() {
  if (!connect(kParked)) return false;
  clients_.clear();
  servers_.clear();
  return loop_.run_for([&] { return cm_.idle() == 2 * kParked && cm_.recycling() == 0; }, 30s);
}

// `parked`: the structures idle when the delete started.
int Helper::after_removal(std::uint64_t parked) {
  Stream none;
  Stream& c = clients_.empty() ? none : clients_.front();
  Stream& s = servers_.empty() ? none : servers_.front();
  const bool open = c.valid();
  // The delete starts in another process: the first sign of it starts the clock.
  loop_.run_for([&] { return open ? c.error() || s.error() : cm_.idle() == 0; }, 60s);
  const auto t0 = rmsg::Clock::now();
  const bool failed = !open || loop_.run_for([&] { return c.error() && s.error(); }, 30s);
  const double failed_ms = ms_since(t0);
  const bool dropped = loop_.run_for([&] { return cm_.idle() == 0 && cm_.recycling() == 0; }, 30s);
  const bool released = loop_.run_for([&] { return removed_device_files() == 0; }, 30s);
  const double released_ms = ms_since(t0);
  const std::string sys = "/sys/class/infiniband/" + device_;
  const bool gone = loop_.run_for([&] { return !std::filesystem::exists(sys); }, 30s);
  const double gone_ms = ms_since(t0);
  std::string why;
  const int qp = rmsg::testing::verbs_objects("qp", &why);
  const int cq = rmsg::testing::verbs_objects("cq", &why);
  const int mr = rmsg::testing::verbs_objects("mr", &why);
  const int pd = rmsg::testing::verbs_objects("pd", &why);
  char line[512];
  std::snprintf(line, sizeof line,
                "removed: client %s; server %s; listener %s; failed +%.0f ms; "
                "structures.device_removed %llu devices.removed %llu idle %zu recycling %zu; "
                "removed-device files %d at +%.0f ms; device %s at +%.0f ms; "
                "left qp %d cq %d mr %d pd %d %s",
                c.error().message().c_str(), s.error().message().c_str(),
                listener_.error().message().c_str(), failed_ms,
                static_cast<unsigned long long>(counter("structures.device_removed")),
                static_cast<unsigned long long>(counter("devices.removed")), cm_.idle(),
                cm_.recycling(), removed_device_files(), released_ms, gone ? "gone" : "still there",
                gone_ms, qp, cq, mr, pd, why.c_str());
  say(line);
  const auto removal = rmsg::make_error_code(rmsg::Errc::device_error);
  const auto reset = rmsg::make_error_code(rmsg::Errc::connection_reset);
  const auto ok = [&](std::error_code ec) { return ec == removal || ec == reset; };
  const bool errors =
      !open || (ok(c.error()) && ok(s.error()) && (c.error() == removal || s.error() == removal));
  const bool counted =
      counter("structures.device_removed") == parked && counter("devices.removed") == 1;
  const bool clean = qp == 0 && cq == 0 && mr == 0 && pd == 0;
  return failed && errors && dropped && counted && released && gone && clean ? 0 : 5;
}

int Helper::after_recreate() {
  const auto t0 = rmsg::Clock::now();
  if (!loop_.run_for([&] { return port_active(device_); }, 60s)) return 6;
  const double back_ms = ms_since(t0);
  clients_.clear();
  servers_.clear();
  listener_.close();
  const auto created = counter("structures.created");
  const auto reused = counter("structures.reused");
  bool any_reused = false;
  // A device just made may refuse a bind for a moment after its port is ACTIVE (seen once:
  // its address is not yet its own): retried until it takes.
  if (!loop_.run_for([&] { return listen(); }, 10s) || !connect(1, &any_reused)) return 6;
  Stream& c = clients_.front();
  Stream& s = servers_.front();
  const char msg[] = "after the device came back";
  char got[sizeof msg] = {};
  std::size_t n = 0;
  auto w = c.write(msg, sizeof msg);
  const bool moved = w && w.value() == sizeof msg &&
                     loop_.run_for(
                         [&] {
                           auto r = s.read(got + n, sizeof got - n);
                           if (r) n += r.value();
                           return n == sizeof got || (!r && !r.is(rmsg::Errc::would_block));
                         },
                         10s) &&
                     std::string_view(got, n) == std::string_view(msg, sizeof msg);
  char line[256];
  std::snprintf(line, sizeof line,
                "reconnected: device active after %.0f ms; created +%llu reused +%llu; data %s",
                back_ms, static_cast<unsigned long long>(counter("structures.created") - created),
                static_cast<unsigned long long>(counter("structures.reused") - reused),
                moved ? "ok" : "lost");
  say(line);
  return moved && !any_reused && counter("structures.created") == created + 2 &&
                 counter("structures.reused") == reused
             ? 0
             : 6;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  rmsg::set_log_handler(rmsg::log_to_stderr, rmsg::LogLevel::info);
  auto address = rmsg::SocketAddress::from_host_port(argv[1], 0);
  auto loop = rmsg::EventLoop::create();
  if (!address || !loop) return 3;
  rmsg::ConnectionManagerOptions o;
  o.wait_timewait = false;  // parks at once: no 2 s TIMEWAIT per structure
  auto cm = ConnectionManager::create(**loop, o);
  if (!cm) return 3;
  // Re-evaluates run_for's predicates while nothing else happens.
  const auto tick = (*loop)->add_periodic(20ms, [] {});
  Helper h(**loop, **cm, *address, argv[2]);
  const bool idle_only = argc > 3 && std::string_view(argv[3]) == "idle";
  bool reused = false;
  if (!h.listen() || !h.park()) return 3;
  if (idle_only) {
    h.close_listener();
  } else if (!h.connect(1, &reused) || !reused) {
    return 3;
  }
  const auto parked = (*cm)->idle();
  say("connected: idle " + std::to_string(parked));
  int rc = h.after_removal(parked);
  if (rc == 0) rc = h.after_recreate();
  (*loop)->cancel_timer(tick);
  return rc;
}
