#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "base/debug_assert.h"
#include "base/retry_rules.h"

#include "rmsg/result.h"

namespace rmsg {
namespace {

class RmsgCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "rmsg"; }
  std::string message(int code) const override {
    switch (static_cast<Errc>(code)) {
      case Errc::ok:
        return "success";
      case Errc::would_block:
        return "operation would block";
      case Errc::peer_closed:
        return "peer closed the connection";
      case Errc::timeout:
        return "timed out";
      case Errc::protocol_error:
        return "protocol error: peer sent malformed data";
      case Errc::rejected:
        return "connection rejected by peer";
      case Errc::unreachable:
        return "peer unreachable";
      case Errc::address_error:
        return "address resolution failed";
      case Errc::route_error:
        return "route resolution failed";
      case Errc::connection_reset:
        return "connection reset";
      case Errc::connection_refused:
        return "connection refused";
      case Errc::not_connected:
        return "not connected";
      case Errc::closed:
        return "stream closed";
      case Errc::cancelled:
        return "operation cancelled";
      case Errc::resource_exhausted:
        return "resources exhausted";
      case Errc::invalid_argument:
        return "invalid argument";
      case Errc::version_mismatch:
        return "protocol version mismatch";
      case Errc::device_error:
        return "RDMA device error";
      case Errc::not_supported:
        return "not supported";
      case Errc::shutdown:
        return "write side already shut down";
    }
    return "unknown rmsg error " + std::to_string(code);
  }
};

}  // namespace

const std::error_category& error_category() noexcept {
  static const RmsgCategory category;
  return category;
}

namespace {

bool errno_retryable(int err) noexcept {
  switch (err) {
    case EAGAIN:
    case EINTR:
    case ENOBUFS:
    case ENOMEM:
    case EINPROGRESS:
    case ETIMEDOUT:
    case ECONNREFUSED:
    case EHOSTUNREACH:
    case ENETUNREACH:
      return true;
    default:
      return false;
  }
}

// A fixed table, not a vector: registering happens inside the first use of a category,
// which may be on a path that must not allocate (a decoder rejecting an oversize frame).
struct Registry {
  struct Rule {
    const std::error_category* category = nullptr;
    std::uint64_t codes = 0;
    KindOf kind_of = nullptr;
  };
  std::mutex mu;
  std::array<Rule, 32> rules{};
  std::size_t size = 0;
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

bool register_retryable(const std::error_category& category, std::uint64_t codes,
                        KindOf kind_of) noexcept {
  Registry& r = registry();
  const std::lock_guard lock(r.mu);
  for (std::size_t i = 0; i < r.size; ++i) {
    if (*r.rules[i].category == category) {
      r.rules[i].codes = codes;
      r.rules[i].kind_of = kind_of;
      return true;
    }
  }
  // The library defines fewer categories than the table holds; one more is a bug here.
  RMSG_DEBUG_ASSERT(r.size < r.rules.size());
  if (r.size < r.rules.size()) r.rules[r.size++] = {&category, codes, kind_of};
  return true;
}

bool is_retryable(std::error_code ec) noexcept {
  const std::error_category& category = ec.category();
  if (category == error_category()) {
    switch (static_cast<Errc>(ec.value())) {
      case Errc::would_block:
      case Errc::resource_exhausted:
      case Errc::unreachable:
      case Errc::route_error:
      case Errc::connection_refused:
        return true;
      default:
        return false;
    }
  }
  if (category == std::system_category() || category == std::generic_category()) {
    return errno_retryable(ec.value());
  }
  {
    Registry& r = registry();
    const std::lock_guard lock(r.mu);
    for (std::size_t i = 0; i < r.size; ++i) {
      if (*r.rules[i].category == category) {
        const std::uint64_t mask = r.rules[i].codes;
        return ec.value() >= 0 && ec.value() < 64 && ((mask >> ec.value()) & 1) != 0;
      }
    }
  }
  const std::error_condition condition = ec.default_error_condition();
  return condition.category() == std::generic_category() && errno_retryable(condition.value());
}

namespace {

ErrorKind errno_kind(int err) noexcept {
  switch (err) {
    case 0:
      return ErrorKind::none;
    case ETIMEDOUT:
      return ErrorKind::timeout;
    case ECONNREFUSED:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case EHOSTDOWN:
    case ENETDOWN:
    case ENODEV:
    case EADDRNOTAVAIL:
      return ErrorKind::unreachable;
    case ECONNRESET:
    case ECONNABORTED:
    case EPIPE:
    case ENOTCONN:
    case ESHUTDOWN:
      return ErrorKind::connection_lost;
    case EAGAIN:
    case ENOBUFS:
    case ENOMEM:
    case EMFILE:
    case ENFILE:
    case EBUSY:
      return ErrorKind::overloaded;
    case EINVAL:
    case EBADF:
    case EAFNOSUPPORT:
    case EDESTADDRREQ:
      return ErrorKind::invalid_argument;
    case EOPNOTSUPP:
    case ENOSYS:
    case EPROTONOSUPPORT:
      return ErrorKind::not_supported;
    case EPROTO:
    case EBADMSG:
      return ErrorKind::protocol;
    case ECANCELED:
      return ErrorKind::cancelled;
    default:
      return ErrorKind::other;
  }
}

ErrorKind errc_kind(Errc e) noexcept {
  switch (e) {
    case Errc::ok:
      return ErrorKind::none;
    case Errc::would_block:
    case Errc::resource_exhausted:
      return ErrorKind::overloaded;
    case Errc::peer_closed:
    case Errc::connection_reset:
    case Errc::not_connected:
      return ErrorKind::connection_lost;
    case Errc::timeout:
      return ErrorKind::timeout;
    case Errc::protocol_error:
      return ErrorKind::protocol;
    case Errc::rejected:
    case Errc::version_mismatch:
      return ErrorKind::rejected;
    case Errc::unreachable:
    case Errc::route_error:
    case Errc::connection_refused:
      return ErrorKind::unreachable;
    case Errc::address_error:
    case Errc::invalid_argument:
      return ErrorKind::invalid_argument;
    case Errc::closed:
    case Errc::shutdown:
      return ErrorKind::shutting_down;
    case Errc::cancelled:
      return ErrorKind::cancelled;
    case Errc::device_error:
      return ErrorKind::device;
    case Errc::not_supported:
      return ErrorKind::not_supported;
  }
  return ErrorKind::other;
}

}  // namespace

ErrorKind error_kind(std::error_code ec) noexcept {
  if (!ec) return ErrorKind::none;
  const std::error_category& category = ec.category();
  if (category == error_category()) return errc_kind(static_cast<Errc>(ec.value()));
  if (category == std::system_category() || category == std::generic_category()) {
    return errno_kind(ec.value());
  }
  {
    Registry& r = registry();
    const std::lock_guard lock(r.mu);
    for (std::size_t i = 0; i < r.size; ++i) {
      if (*r.rules[i].category == category) {
        return r.rules[i].kind_of != nullptr ? r.rules[i].kind_of(ec.value()) : ErrorKind::other;
      }
    }
  }
  const std::error_condition condition = ec.default_error_condition();
  return condition.category() == std::generic_category() ? errno_kind(condition.value())
                                                         : ErrorKind::other;
}

const char* to_string(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::none:
      return "none";
    case ErrorKind::timeout:
      return "timeout";
    case ErrorKind::unreachable:
      return "unreachable";
    case ErrorKind::connection_lost:
      return "connection_lost";
    case ErrorKind::session_reset:
      return "session_reset";
    case ErrorKind::overloaded:
      return "overloaded";
    case ErrorKind::rejected:
      return "rejected";
    case ErrorKind::protocol:
      return "protocol";
    case ErrorKind::application:
      return "application";
    case ErrorKind::cancelled:
      return "cancelled";
    case ErrorKind::shutting_down:
      return "shutting_down";
    case ErrorKind::invalid_argument:
      return "invalid_argument";
    case ErrorKind::device:
      return "device";
    case ErrorKind::not_supported:
      return "not_supported";
    case ErrorKind::other:
      return "other";
  }
  return "other";
}

}  // namespace rmsg
