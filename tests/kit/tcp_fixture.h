// A loop plus a loopback listener (127.0.0.1, port 0) whose accepted streams queue up.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <deque>
#include <optional>
#include <utility>

#include "kit/loop_fixture.h"
#include "rmsg/tcp.h"

namespace rmsg::testing {

using namespace std::chrono_literals;

class TcpTest : public LoopTest {
 protected:
  static SocketAddress loopback(std::uint16_t port = 0) {
    return SocketAddress::from_host_port("127.0.0.1", port).value();
  }

  // Starts listener_ on 127.0.0.1:0; accepted streams land in accepted_.
  void listen(const TcpOptions& options = {}) {
    auto l = tcp_listen(loop(), loopback(), options,
                        [this](Stream s) { accepted_.push_back(std::move(s)); });
    ASSERT_TRUE(l.ok()) << l.error().message();
    listener_ = std::move(l).value();
    ASSERT_NE(listener_.port(), 0);
  }

  // Connects to listener_ on the same loop thread: {client, server}.
  std::pair<Stream, Stream> connect_pair(const TcpOptions& options = {}) {
    if (!listener_.valid()) listen(options);
    std::optional<Result<Stream>> client;
    tcp_connect(loop(), loopback(listener_.port()), options,
                [&](Result<Stream> r) { client.emplace(std::move(r)); });
    const bool done = loop().run_for([&] { return client.has_value() && !accepted_.empty(); }, 10s);
    EXPECT_TRUE(done) << "connect did not complete";
    if (!done || !client->ok()) {
      ADD_FAILURE() << "connect: " << (client ? client->error().message() : "pending");
      return {};
    }
    Stream server = std::move(accepted_.front());
    accepted_.pop_front();
    return {std::move(*client).value(), std::move(server)};
  }

  Listener listener_;
  std::deque<Stream> accepted_;
};

}  // namespace rmsg::testing
