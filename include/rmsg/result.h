// Result<T>: a value or a std::error_code. rmsg reports every failure as a value: no
// exceptions on the data path, never exit()/abort() because of what a peer did.
//
// Error codes come from three categories:
//   - std::system_category()   errno values from the kernel and from rdma-core,
//   - rmsg::error_category()   rmsg's own conditions (rmsg::Errc below),
//   - rmsg::wc_category()      work-completion status of a verbs completion (rdma builds).
// rmsg::is_retryable(ec) tells whether trying the same operation later can succeed, and
// rmsg::error_kind(ec) what sort of failure it is: both answer for a code of any of them and
// of every other category the library defines (one question, whichever layer failed).
#pragma once

#include <cassert>
#include <cstdint>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

#include "rmsg/export.h"

namespace rmsg {

// rmsg's own conditions. Values are stable (they show up in logs and counters).
enum class Errc {
  ok = 0,
  would_block = 1,          // retryable: no data / no space now; wait for readiness.
  peer_closed = 2,          // not retryable: the peer shut down its side (orderly).
  timeout = 3,              // not retryable on this connection: a deadline passed.
  protocol_error = 4,       // not retryable: the peer sent something malformed.
  rejected = 5,             // not retryable as is: the peer refused the connection.
  unreachable = 6,          // retryable later: no route / peer unreachable.
  address_error = 7,        // not retryable: address resolution failed or bad address.
  route_error = 8,          // retryable later: route resolution failed.
  connection_reset = 9,     // not retryable: the connection was torn down abortively.
  connection_refused = 10,  // retryable later: nothing listens at the peer address.
  not_connected = 11,       // not retryable: the stream is not (or no longer) connected.
  closed = 12,              // not retryable: this side closed the stream.
  cancelled = 13,           // not retryable: the operation was cancelled locally.
  resource_exhausted = 14,  // retryable later: queue full, pool exhausted, memlock limit.
  invalid_argument = 15,    // not retryable: the caller passed something invalid.
  version_mismatch = 16,    // not retryable: the peer speaks another protocol version.
  device_error = 17,        // not retryable: the RDMA device failed or was removed.
  not_supported = 18,       // not retryable: this build or device cannot do it.
  shutdown = 19,            // not retryable: writes after shutdown_write().
};

RMSG_EXPORT const std::error_category& error_category() noexcept;

inline std::error_code make_error_code(Errc e) noexcept {
  return {static_cast<int>(e), error_category()};
}

// An errno value as an error_code (system category).
inline std::error_code errno_code(int err) noexcept {
  return {err, std::system_category()};
}

// True when the same operation may succeed if tried again later: Errc as marked above,
// errno values (system or generic category) EAGAIN, EINTR, ENOBUFS, ENOMEM, EINPROGRESS,
// ETIMEDOUT, ECONNREFUSED, EHOSTUNREACH, ENETUNREACH, and every other category rmsg defines
// as its header says (rmsg/connection_manager.h, rdma_errors.h, messenger.h, rpc.h; the
// wire's: never). Another category: by the generic condition its code maps to, if any.
RMSG_EXPORT bool is_retryable(std::error_code ec) noexcept;

// What sort of failure a code is, whichever of the library's categories it comes from (and
// errno values): what an application branches on instead of five enums. is_retryable()
// says, per code, whether to try again; the kind says what to tell a user or log.
enum class ErrorKind : std::uint8_t {
  none = 0,               // no error (an empty error_code)
  timeout = 1,            // a deadline passed: a call's, a connect step's, a handshake's
  unreachable = 2,        // the peer cannot be reached: refused, no route, no device
  connection_lost = 3,    // a connection ended: closed, reset, idle, replaced, cut short
  session_reset = 4,      // the peer's session ended: what was sent may or may not have run
  overloaded = 5,         // a bound here or at the peer (queue full, limit): later may work
  rejected = 6,           // the peer refused it: wrong node, version, method, size
  protocol = 7,           // the peer sent something malformed (a broken or foreign peer)
  application = 8,        // the handler answered with an error (RpcResponse::app_code)
  cancelled = 9,          // cancelled here
  shutting_down = 10,     // this side or the peer is shutting down, or closed it
  invalid_argument = 11,  // the caller passed something invalid
  device = 12,            // the RDMA device failed (work completion, device event, memlock)
  not_supported = 13,     // this build, device or peer cannot do it
  other = 14,             // anything else (an errno value without a kind above)
};
RMSG_EXPORT ErrorKind error_kind(std::error_code ec) noexcept;
RMSG_EXPORT const char* to_string(ErrorKind kind) noexcept;  // "timeout", "unreachable", ...

}  // namespace rmsg

template <>
struct std::is_error_code_enum<rmsg::Errc> : std::true_type {};

namespace rmsg {

// A value of type T or an error. [[nodiscard]]: ignoring a Result is a compile warning
// (an error in rmsg's build). Access value() only after checking ok().
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit
  Result(std::error_code ec) : v_(std::in_place_index<1>, ec) {      // NOLINT: implicit
    assert(ec);
  }
  Result(Errc e) : Result(make_error_code(e)) {}  // NOLINT: implicit

  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

  std::error_code error() const noexcept { return ok() ? std::error_code{} : std::get<1>(v_); }
  bool is(Errc e) const noexcept { return error() == make_error_code(e); }

 private:
  std::variant<T, std::error_code> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(std::error_code ec) : ec_(ec) {}      // NOLINT: implicit
  Result(Errc e) : ec_(make_error_code(e)) {}  // NOLINT: implicit

  bool ok() const noexcept { return !ec_; }
  explicit operator bool() const noexcept { return ok(); }
  std::error_code error() const noexcept { return ec_; }
  bool is(Errc e) const noexcept { return ec_ == make_error_code(e); }

 private:
  std::error_code ec_;
};

// Propagates an error from an expression returning Result<...> to the caller.
#define RMSG_TRY(expr)                                  \
  do {                                                  \
    if (auto rmsg_try_r_ = (expr); !rmsg_try_r_.ok()) { \
      return rmsg_try_r_.error();                       \
    }                                                   \
  } while (0)

}  // namespace rmsg
