// rdma-core error categories: work-completion status and asynchronous device events with
// the verbs' own messages, and the memlock-limit condition.
#include <infiniband/verbs.h>

#include <string>

#include "base/retry_rules.h"
#include "rmsg/rdma_errors.h"

namespace rmsg {
namespace {

class WcCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "rdma-wc"; }
  std::string message(int code) const override {
    return std::string("work completion: ") + ibv_wc_status_str(static_cast<ibv_wc_status>(code));
  }
};

class AsyncEventCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "rdma-async-event"; }
  std::string message(int code) const override {
    return std::string("device event: ") + ibv_event_type_str(static_cast<ibv_event_type>(code));
  }
};

class MemlockCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "rdma-memlock"; }
  std::string message(int) const override {
    return "cannot register (pin) RDMA ring memory: RLIMIT_MEMLOCK is too low; raise it "
           "(ulimit -l, LimitMEMLOCK= in a systemd unit, memlock in limits.conf) or give the "
           "process CAP_IPC_LOCK";
  }
};

// rdma_errors.h: each of these failed the device's work (ErrorKind::device).
ErrorKind device_kind(int) noexcept {
  return ErrorKind::device;
}

}  // namespace

const std::error_category& async_event_category() noexcept {
  static const AsyncEventCategory category;
  static const bool rule = register_retryable(category, 0, device_kind);  // rdma_errors.h: none
  static_cast<void>(rule);
  return category;
}

std::error_code memlock_limit_error() noexcept {
  static const MemlockCategory category;
  static const bool rule = register_retryable(category, 0, device_kind);  // rdma_errors.h: none
  static_cast<void>(rule);
  return {1, category};
}

const std::error_category& wc_category() noexcept {
  static const WcCategory category;
  static const bool rule = register_retryable(category, 0, device_kind);  // rdma_errors.h: none
  static_cast<void>(rule);
  return category;
}

}  // namespace rmsg
