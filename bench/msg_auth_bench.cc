// The cost of authentication per connection (docs/perf.md, Authenticated reconnects): two
// messengers on one loop over real TCP (127.0.0.1); each round kills A's connection and
// runs until A's session is connected again (a reconnect: connect, banners, with keys the
// two proofs, hello, welcome). Prints the median and p99 time per reconnect and the
// user-space instructions per reconnect (both sides: one process), for auth off and
// require, and the ratio; then one Ed25519 sign and verify alone. Not a test: numbers only.
//   msg_auth_bench [ROUNDS [off|require]]   (one mode alone: for callgrind, where the
//   hardware counter is missing: run two ROUNDS and subtract, as bench/rpc_instructions.sh)
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "auth/keys.h"
#include "msg/killable_streams.h"
#include "msg/seams.h"
#include "rmsg/event_loop.h"
#include "rmsg/messenger.h"

namespace {

using namespace rmsg;
using Clock = std::chrono::steady_clock;

// User-space instructions of this process (perf_event_open); -1 when not available.
class Instructions {
 public:
  Instructions() {
    perf_event_attr a{};
    a.type = PERF_TYPE_HARDWARE;
    a.size = sizeof(a);
    a.config = PERF_COUNT_HW_INSTRUCTIONS;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    fd_ = static_cast<int>(::syscall(SYS_perf_event_open, &a, 0, -1, -1, 0));
  }
  ~Instructions() {
    if (fd_ >= 0) ::close(fd_);
  }
  long long read() const {
    long long v = -1;
    if (fd_ < 0 || ::read(fd_, &v, sizeof v) != sizeof v) return -1;
    return v;
  }

 private:
  int fd_ = -1;
};

struct Side {
  std::unique_ptr<Messenger> m;
  testing::KillableStreams* streams = nullptr;
  int connected = 0;
  std::string address;
};

struct Result2 {
  double median_us = 0;
  double p99_us = 0;
  double instructions = -1;
};

Result2 run(EventLoop& loop, AuthPolicy policy, const std::string& dir, int rounds) {
  Side a;
  Side b;
  auto make = [&](Side& s, NodeId id) {
    MessengerOptions o;
    o.node_id = id;
    o.backoff_initial = std::chrono::microseconds(1);
    o.backoff_max = std::chrono::microseconds(2);
    o.auth = policy;
    o.auth_key_file = dir + "/" + std::to_string(id) + ".key";
    o.auth_keyring_file = dir + "/keyring";
    auto streams = std::make_unique<testing::KillableStreams>(loop);
    s.streams = streams.get();
    auto m = MessengerAccess::create(
        loop, o, std::move(streams), [](NodeId, std::span<const std::byte>) {},
        [&s](SessionEvent e) { s.connected += e.kind == SessionEvent::Kind::connected; });
    if (!m) {
      std::fprintf(stderr, "create: %s\n", m.error().message().c_str());
      std::exit(1);
    }
    s.m = std::move(m).value();
    ConnectionParams p;
    p.transport = Transport::tcp;
    s.address = s.m->listen(SocketAddress::from_host_port("127.0.0.1", 0).value(), p).value();
  };
  make(a, 1);
  make(b, 2);
  ConnectionParams p;
  p.transport = Transport::tcp;
  p.peer = SocketAddress::parse(b.address).value();
  (void)a.m->add_peer(2, p);
  const std::byte msg[8] = {};
  (void)a.m->send(2, std::span<const std::byte>(msg));
  loop.run_for([&] { return a.connected == 1; }, std::chrono::seconds(10));
  std::vector<double> us;
  Instructions ins;
  long long total = 0;
  for (int i = 0; i < rounds; ++i) {
    const int want = a.connected + 1;
    const long long i0 = ins.read();
    const auto t0 = Clock::now();
    a.streams->kill_all();
    loop.run_for([&] { return a.connected == want; }, std::chrono::seconds(10));
    const auto t1 = Clock::now();
    const long long i1 = ins.read();
    if (a.connected != want) {
      std::fprintf(stderr, "round %d: no reconnect\n", i);
      std::exit(1);
    }
    total += i1 - i0;
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    // Let B notice the old connection's end before the next round.
    loop.run_for([] { return false; }, std::chrono::milliseconds(1));
  }
  std::sort(us.begin(), us.end());
  Result2 r;
  r.median_us = us[us.size() / 2];
  r.p99_us = us[std::min(us.size() - 1, us.size() * 99 / 100)];
  r.instructions = ins.read() < 0 ? -1 : static_cast<double>(total) / rounds;
  a.m.reset();
  b.m.reset();
  loop.run_for([] { return false; }, std::chrono::milliseconds(10));
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 300;
  char tmpl[] = "/tmp/rmsg-authbench-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) return 1;
  const std::string dir = tmpl;
  std::ofstream ring(dir + "/keyring");
  std::vector<auth::PrivateKey> keys;
  for (int id : {1, 2}) {
    auto k = auth::PrivateKey::create(dir + "/" + std::to_string(id) + ".key");
    if (!k) return 1;
    ring << id << " " << auth::to_hex(k.value().public_key()) << "\n";
    keys.push_back(std::move(k).value());
  }
  ring.close();
  auto loop = EventLoop::create().value();
  const std::string only = argc > 2 ? argv[2] : "";
  if (!only.empty()) {
    const Result2 r =
        run(*loop, only == "off" ? AuthPolicy::off : AuthPolicy::require, dir, rounds);
    std::printf("%s: median %.1f us\n", only.c_str(), r.median_us);
    for (const char* f : {"/1.key", "/2.key", "/keyring"}) ::unlink((dir + f).c_str());
    ::rmdir(dir.c_str());
    return 0;
  }
  const Result2 off = run(*loop, AuthPolicy::off, dir, rounds);
  const Result2 on = run(*loop, AuthPolicy::require, dir, rounds);
  std::printf("reconnect over TCP, %d rounds\n", rounds);
  std::printf("  auth off:     median %7.1f us  p99 %7.1f us  instructions %10.0f\n", off.median_us,
              off.p99_us, off.instructions);
  std::printf("  auth require: median %7.1f us  p99 %7.1f us  instructions %10.0f\n", on.median_us,
              on.p99_us, on.instructions);
  std::printf("  ratio (require/off): median %.2fx  instructions %.2fx (-1: not counted)\n",
              on.median_us / off.median_us,
              off.instructions > 0 ? on.instructions / off.instructions : -1.0);
  // The primitives alone: one sign and one verify over a 32-byte digest.
  const std::byte digest[32] = {};
  auto v = auth::Verifier::make(keys[0].public_key()).value();
  auth::Signature sig{};
  constexpr int kN = 2000;
  Instructions ins;
  auto t0 = Clock::now();
  long long i0 = ins.read();
  for (int i = 0; i < kN; ++i) sig = keys[0].sign(digest).value();
  long long i1 = ins.read();
  auto t1 = Clock::now();
  bool ok = true;
  for (int i = 0; i < kN; ++i) ok = ok && v.verify(digest, sig);
  long long i2 = ins.read();
  auto t2 = Clock::now();
  // -1: no hardware counter here (a VM); callgrind gives the instructions instead.
  const bool counted = i0 >= 0;
  std::printf("  Ed25519 sign:   %6.1f us  %8lld instructions\n",
              std::chrono::duration<double, std::micro>(t1 - t0).count() / kN,
              counted ? (i1 - i0) / kN : -1);
  std::printf("  Ed25519 verify: %6.1f us  %8lld instructions%s\n",
              std::chrono::duration<double, std::micro>(t2 - t1).count() / kN,
              counted ? (i2 - i1) / kN : -1, ok ? "" : " (FAILED)");
  for (const char* f : {"/1.key", "/2.key", "/keyring"}) ::unlink((dir + f).c_str());
  ::rmdir(dir.c_str());
  return 0;
}
