// Error categories of the verbs layer: what a work completion, an asynchronous device
// event or a failed registration reports. rmsg/rdma.h includes this header; code that only
// inspects an error (is it a work-completion error? which one?) may include it alone.
//
// No code of these categories is retryable (rmsg::is_retryable): a failed work completion
// or device event ends the stream it came from (a new connection is a new operation), and
// the memlock limit stays until raised. rmsg::error_kind: every one is ErrorKind::device.
//
// Threading: everything here is thread-safe (the categories are immutable singletons).
#pragma once

#include <system_error>

#include "rmsg/export.h"

namespace rmsg {

// Work-completion status (enum ibv_wc_status) as errors; messages from ibv_wc_status_str.
RMSG_EXPORT const std::error_category& wc_category() noexcept;
inline std::error_code make_wc_error(int wc_status) noexcept {
  return {wc_status, wc_category()};
}

// An asynchronous device event (enum ibv_event_type: QP_FATAL, PORT_ERR, DEVICE_FATAL...)
// that failed a stream; messages from ibv_event_type_str.
RMSG_EXPORT const std::error_category& async_event_category() noexcept;
inline std::error_code make_async_event_error(int event_type) noexcept {
  return {event_type, async_event_category()};
}

// Registering (pinning) ring memory failed under RLIMIT_MEMLOCK (ibv_reg_mr ENOMEM/EPERM
// without CAP_IPC_LOCK). Not retryable: the limit must be raised (ulimit -l, systemd
// LimitMEMLOCK=) or the process granted CAP_IPC_LOCK; the message says so.
RMSG_EXPORT std::error_code memlock_limit_error() noexcept;

}  // namespace rmsg
