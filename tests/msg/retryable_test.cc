// rmsg::is_retryable and rmsg::error_kind against what the headers promise, code by code,
// for every error category the library defines (rmsg/result.h, connection_manager.h,
// rdma_errors.h, messenger.h, rpc.h, and the wire's): the tables below are the headers'
// contract.
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

using K = ErrorKind;

// Every code of every category, its kind; codes past `kinds` (and unknown values) are
// ErrorKind::other, code 0 (no error) ErrorKind::none.
struct KindContract {
  std::string what;
  std::function<std::error_code(int)> make;
  std::vector<ErrorKind> kinds;  // by code, from 1
};

std::vector<KindContract> kind_contracts() {
  const auto wc = [](int c) { return make_wc_error(c); };
  const auto ev = [](int c) { return make_async_event_error(c); };
  std::vector<ErrorKind> protocol(static_cast<std::size_t>(wire::kWireErrcCount) - 2, K::protocol);
  protocol.push_back(K::connection_lost);  // truncated: the stream ended inside a frame
  return {
      {"rmsg",
       [](int c) { return make_error_code(static_cast<Errc>(c)); },
       {K::overloaded, K::connection_lost, K::timeout, K::protocol, K::rejected, K::unreachable,
        K::invalid_argument, K::unreachable, K::connection_lost, K::unreachable, K::connection_lost,
        K::shutting_down, K::cancelled, K::overloaded, K::invalid_argument, K::rejected, K::device,
        K::not_supported, K::shutting_down}},
      {"connect",
       [](int c) { return make_error_code(static_cast<ConnectErrc>(c)); },
       {K::timeout, K::timeout, K::timeout, K::overloaded}},
      {"messenger",
       [](int c) { return make_error_code(static_cast<MessengerErrc>(c)); },
       {K::session_reset, K::session_reset, K::session_reset, K::rejected, K::timeout, K::protocol,
        K::protocol, K::protocol, K::protocol, K::connection_lost, K::connection_lost,
        K::shutting_down, K::connection_lost, K::protocol, K::session_reset, K::connection_lost,
        K::rejected}},
      {"rpc",
       [](int c) { return make_error_code(static_cast<RpcErrc>(c)); },
       {K::application, K::rejected, K::rejected, K::shutting_down, K::timeout, K::cancelled,
        K::session_reset}},
      {"wire", [](int c) { return wire::make_error_code(static_cast<wire::WireErrc>(c)); },
       protocol},
      {"wc", wc, std::vector<ErrorKind>(40, K::device)},
      {"async_event", ev, std::vector<ErrorKind>(40, K::device)},
  };
}

TEST(ErrorKinds, EveryCodeOfEveryCategoryHasItsKind) {
  for (const KindContract& c : kind_contracts()) {
    EXPECT_EQ(error_kind(c.make(0)), K::none) << c.what;
    for (std::size_t i = 0; i < c.kinds.size(); ++i) {
      const std::error_code ec = c.make(static_cast<int>(i + 1));
      EXPECT_EQ(error_kind(ec), c.kinds[i])
          << c.what << " code " << i + 1 << " (" << ec.message() << "): got "
          << to_string(error_kind(ec)) << ", want " << to_string(c.kinds[i]);
    }
    if (c.what == "wc" || c.what == "async_event") continue;  // every status is the device's
    EXPECT_EQ(error_kind(c.make(static_cast<int>(c.kinds.size()) + 1)), K::other) << c.what;
  }
  EXPECT_EQ(error_kind(memlock_limit_error()), K::device);
}

TEST(ErrorKinds, ErrnoValuesAndUnknownCategories) {
  const auto sys = [](int e) { return std::error_code(e, std::system_category()); };
  EXPECT_EQ(error_kind(sys(ECONNREFUSED)), K::unreachable);
  EXPECT_EQ(error_kind(sys(EHOSTUNREACH)), K::unreachable);
  EXPECT_EQ(error_kind(sys(ENETUNREACH)), K::unreachable);
  EXPECT_EQ(error_kind(sys(ENODEV)), K::unreachable);
  EXPECT_EQ(error_kind(sys(ETIMEDOUT)), K::timeout);
  EXPECT_EQ(error_kind(sys(ECONNRESET)), K::connection_lost);
  EXPECT_EQ(error_kind(sys(EPIPE)), K::connection_lost);
  EXPECT_EQ(error_kind(sys(EAGAIN)), K::overloaded);
  EXPECT_EQ(error_kind(sys(EMFILE)), K::overloaded);
  EXPECT_EQ(error_kind(sys(EINVAL)), K::invalid_argument);
  EXPECT_EQ(error_kind(sys(EOPNOTSUPP)), K::not_supported);
  EXPECT_EQ(error_kind(sys(ECANCELED)), K::cancelled);
  EXPECT_EQ(error_kind(sys(ENOENT)), K::other);
  EXPECT_EQ(error_kind(std::make_error_code(std::errc::connection_refused)), K::unreachable);
  EXPECT_EQ(error_kind(std::error_code{}), K::none);
  // A category rmsg does not define: by the generic condition it maps to.
  EXPECT_EQ(error_kind(std::make_error_code(std::io_errc::stream)), K::other);
}

TEST(ErrorKinds, EveryKindHasAName) {
  std::set<std::string> names;
  for (int k = 0; k <= static_cast<int>(K::other); ++k) {
    names.insert(to_string(static_cast<ErrorKind>(k)));
  }
  EXPECT_EQ(names.size(), static_cast<std::size_t>(K::other) + 1);
  EXPECT_STREQ(to_string(K::unreachable), "unreachable");
}

}  // namespace
}  // namespace rmsg
