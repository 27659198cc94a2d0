#include "rmsg/address.h"

#include <gtest/gtest.h>

namespace rmsg {
namespace {

TEST(SocketAddress, ParsesNumericV4AndV6) {
  auto v4 = SocketAddress::parse("127.0.0.1:7000");
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(v4->family(), AF_INET);
  EXPECT_EQ(v4->port(), 7000);
  EXPECT_EQ(v4->to_string(), "127.0.0.1:7000");

  auto v6 = SocketAddress::parse("[::1]:0");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->family(), AF_INET6);
  EXPECT_EQ(v6->to_string(), "[::1]:0");
}

TEST(SocketAddress, RejectsNamesAndGarbage) {
  for (const char* bad : {"localhost:80", "127.0.0.1", "127.0.0.1:", "127.0.0.1:99999", "::1:80",
                          "[::1]80", "[::1", "1.2.3.4:8x", ""}) {
    EXPECT_TRUE(SocketAddress::parse(bad).is(Errc::invalid_argument)) << bad;
  }
}

TEST(SocketAddress, EqualityAndPort) {
  auto a = SocketAddress::parse("10.0.0.1:1").value();
  auto b = SocketAddress::from_host_port("10.0.0.1", 2).value();
  EXPECT_FALSE(a == b);
  b.set_port(1);
  EXPECT_TRUE(a == b);
}

}  // namespace
}  // namespace rmsg
