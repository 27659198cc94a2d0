// A unit test of a user's service (upper_service.h) on rmsg-testing's in-memory loopback:
// no sockets, no devices, one loop, and faults injected where a real network would fail.
// Link rmsg::testing and rmsg::rmsg; `make test` runs it (examples.upper_service_test).
#include <rmsg/event_loop.h>
#include <rmsg/testing/loopback.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "upper_service.h"

namespace {

int failures = 0;
void check(bool ok, const char* what) {
  std::printf("%s: %s\n", ok ? "ok  " : "FAIL", what);
  failures += ok ? 0 : 1;
}

// Connects to the service, sends `text` and EOF, and collects the answer until EOF.
struct Client {
  rmsg::Stream stream;
  std::string got;
  bool eof = false;
  std::error_code error;
  void start(const std::string& text) {
    (void)stream.write(text.data(), text.size());  // small: fits the loopback's buffer
    (void)stream.shutdown_write();
    stream.on_readable([this] {
      char buf[256];
      for (;;) {
        auto n = stream.read(buf, sizeof buf);
        if (!n) {
          if (!n.is(rmsg::Errc::would_block)) error = n.error();
          return;
        }
        if (*n == 0) {
          eof = true;
          return;
        }
        got.append(buf, *n);
      }
    });
  }
};

}  // namespace

int main() {
  using namespace std::chrono_literals;
  namespace rt = rmsg::testing;
  auto loop = std::move(rmsg::EventLoop::create()).value();
  UpperService service;
  auto server_faults = std::make_shared<rt::LoopbackFaults>();
  auto listener = rt::loopback_listen(*loop, "upper", 7000, {.faults = server_faults},
                                      [&](rmsg::Stream s) { service.serve(std::move(s)); });
  check(listener.ok(), "the service listens on upper:7000");

  // 1. The answer, upper-cased, then EOF.
  Client a;
  rt::loopback_connect(*loop, "upper", 7000, {}, [&](rmsg::Result<rmsg::Stream> s) {
    a.stream = std::move(s).value();
    a.start("hello, rmsg");
  });
  loop->run_for([&] { return a.eof || a.error; }, 5s);
  check(a.got == "HELLO, RMSG" && a.eof, "answers upper-cased and closes at the client's EOF");
  check(service.finished == 1, "the service counts one finished connection");

  // 2. The network refuses the first connect: the client sees why, the next one works.
  auto client_faults = std::make_shared<rt::LoopbackFaults>();
  client_faults->fail_connects(rmsg::make_error_code(rmsg::Errc::connection_refused));
  std::error_code refused;
  rt::loopback_connect(*loop, "upper", 7000, {.faults = client_faults},
                       [&](rmsg::Result<rmsg::Stream> s) { refused = s.error(); });
  loop->run_for([&] { return bool(refused); }, 5s);
  check(refused == rmsg::Errc::connection_refused, "an injected refusal reaches the client");

  // 3. The service's side fails after 4 bytes: it counts a failed connection, and the
  //    client's stream fails too (connection_reset), as over a real network.
  server_faults->fail_read(rmsg::make_error_code(rmsg::Errc::connection_reset), 4);
  Client b;
  rt::loopback_connect(*loop, "upper", 7000, {.faults = client_faults},
                       [&](rmsg::Result<rmsg::Stream> s) {
                         b.stream = std::move(s).value();
                         b.start("abcdefgh");
                       });
  loop->run_for([&] { return service.failed == 1 && (b.error || b.eof); }, 5s);
  check(service.failed == 1, "a read fault ends the service's connection as failed");
  check(b.error == rmsg::Errc::connection_reset, "the client sees the connection reset");

  std::printf("upper_service_test: %s\n", failures == 0 ? "passed" : "FAILED");
  return failures == 0 ? 0 : 1;
}
