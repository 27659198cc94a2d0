// A user's service over rmsg::Stream: each connection's bytes come back upper-cased; at the
// peer's EOF it finishes its answer and shuts down its side. Written against rmsg/stream.h
// only, so the same code runs over TCP, RDMA, or the loopback of rmsg-testing.
#pragma once

#include <rmsg/stream.h>

#include <cctype>
#include <cstddef>
#include <list>
#include <vector>

class UpperService {
 public:
  void serve(rmsg::Stream stream) {
    conns_.push_back(Conn{std::move(stream), {}});
    Conn* c = &conns_.back();
    c->stream.on_readable([this, c] { pump(*c); });
    c->stream.on_writable([this, c] { flush(*c); });
    pump(*c);
  }
  int finished = 0;  // connections answered to their EOF
  int failed = 0;    // connections that ended in an error

 private:
  struct Conn {
    rmsg::Stream stream;
    std::vector<std::byte> out;  // answered, not yet accepted by the stream
  };
  void pump(Conn& c) {
    std::byte buf[4096];
    for (;;) {
      auto n = c.stream.read(buf, sizeof buf);
      if (!n) {
        if (!n.is(rmsg::Errc::would_block)) end(c, false);
        return;
      }
      if (*n == 0) {  // EOF: answer what is left, then ours
        flush(c);
        if (c.out.empty() && c.stream.shutdown_write().ok()) end(c, true);
        return;
      }
      for (std::size_t i = 0; i < *n; ++i) {
        c.out.push_back(std::byte(std::toupper(static_cast<unsigned char>(buf[i]))));
      }
      flush(c);
    }
  }
  void flush(Conn& c) {
    while (!c.out.empty()) {
      auto n = c.stream.write(c.out.data(), c.out.size());
      if (!n) {
        if (!n.is(rmsg::Errc::would_block)) end(c, false);
        return;  // on_writable brings us back
      }
      c.out.erase(c.out.begin(), c.out.begin() + static_cast<std::ptrdiff_t>(*n));
    }
  }
  void end(Conn& c, bool ok) {
    ++(ok ? finished : failed);
    c.stream.on_readable({});
    c.stream.on_writable({});
  }
  std::list<Conn> conns_;  // stable addresses for the callbacks
};
