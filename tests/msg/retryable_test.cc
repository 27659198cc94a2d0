// rmsg::is_retryable against what the headers promise, code by code, for every error
// category the library defines (rmsg/result.h, connection_manager.h, rdma_errors.h,
// messenger.h, rpc.h, and the wire's): the table below is the headers' contract.
#include <gtest/gtest.h>

#include <cerrno>
#include <functional>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "rmsg/connection_manager.h"
#include "rmsg/messenger.h"
#include "rmsg/rdma_errors.h"
#include "rmsg/result.h"
#include "rmsg/rpc.h"
#include "wire/frame_errors.h"

namespace rmsg {
namespace {

struct Contract {
  std::string what;
  std::function<std::error_code(int)> make;
  int last;                 // codes 0..last are walked (and one past it: never retryable)
  std::set<int> retryable;  // the header's retryable codes
};

template <class E>
std::set<int> ints(std::initializer_list<E> codes) {
  std::set<int> out;
  for (const E e : codes) out.insert(static_cast<int>(e));
  return out;
}

std::vector<Contract> contracts() {
  const std::set<int> errnos = {EAGAIN,    EINTR,        ENOBUFS,      ENOMEM,     EINPROGRESS,
                                ETIMEDOUT, ECONNREFUSED, EHOSTUNREACH, ENETUNREACH};
  return {
      {"rmsg", [](int c) { return make_error_code(static_cast<Errc>(c)); }, 19,
       ints({Errc::would_block, Errc::unreachable, Errc::route_error, Errc::connection_refused,
             Errc::resource_exhausted})},
      {"system", [](int c) { return std::error_code(c, std::system_category()); }, 133, errnos},
      {"generic", [](int c) { return std::error_code(c, std::generic_category()); }, 133, errnos},
      {"connect", [](int c) { return make_error_code(static_cast<ConnectErrc>(c)); }, 4,
       ints({ConnectErrc::address_timeout, ConnectErrc::route_timeout,
             ConnectErrc::handshake_timeout, ConnectErrc::connection_limit})},
      {"wc", [](int c) { return make_wc_error(c); }, 40, {}},
      {"async_event", [](int c) { return make_async_event_error(c); }, 40, {}},
      {"memlock",
       [](int c) { return std::error_code(c, memlock_limit_error().category()); },
       1,
       {}},
      {"messenger", [](int c) { return make_error_code(static_cast<MessengerErrc>(c)); }, 17,
       ints({MessengerErrc::peer_restarted, MessengerErrc::session_unknown,
             MessengerErrc::lossy_fault, MessengerErrc::handshake_timeout, MessengerErrc::replaced,
             MessengerErrc::peer_closed, MessengerErrc::idle_timeout,
             MessengerErrc::session_expired, MessengerErrc::not_reading})},
      {"rpc", [](int c) { return make_error_code(static_cast<RpcErrc>(c)); }, 7,
       ints({RpcErrc::timeout, RpcErrc::session_reset})},
      {"wire",
       [](int c) { return wire::make_error_code(static_cast<wire::WireErrc>(c)); },
       static_cast<int>(wire::kWireErrcCount) - 1,
       {}},
  };
}

TEST(Retryable, EveryCodeOfEveryCategoryAsItsHeaderSays) {
  for (const Contract& c : contracts()) {
    for (int code = 0; code <= c.last + 1; ++code) {
      const std::error_code ec = c.make(code);
      const bool want = c.retryable.count(code) != 0;
      EXPECT_EQ(is_retryable(ec), want)
          << c.what << " code " << code << " (" << ec.message() << ")";
    }
  }
}

}  // namespace
}  // namespace rmsg
