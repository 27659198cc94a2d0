// A pluggable log hook. rmsg is silent by default: nothing is formatted or written until
// an application installs a handler. Handlers may be called from any loop thread, so
// they must be thread-safe; set_log_handler itself is thread-safe.
#pragma once

#include <functional>
#include <string_view>

#include "rmsg/export.h"

namespace rmsg {

enum class LogLevel { debug = 0, info = 1, warn = 2, error = 3 };

using LogHandler = std::function<void(LogLevel, std::string_view message)>;

// Installs the handler (an empty function silences rmsg again) and the lowest level that
// reaches it.
RMSG_EXPORT void set_log_handler(LogHandler handler, LogLevel min_level = LogLevel::info);

// A ready-made handler that writes "rmsg LEVEL: message" lines to stderr.
RMSG_EXPORT void log_to_stderr(LogLevel level, std::string_view message);

RMSG_EXPORT const char* to_string(LogLevel level) noexcept;

// What RMSG_LOG calls, so public: whether a message at this level would reach the handler,
// and formatting (printf-style) and handing one to it.
RMSG_EXPORT bool log_enabled(LogLevel level) noexcept;
RMSG_EXPORT void log_write(LogLevel level, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));

}  // namespace rmsg

// printf-style; arguments are evaluated only when a handler would receive the message.
#define RMSG_LOG(level, ...)                                   \
  do {                                                         \
    if (::rmsg::log_enabled(::rmsg::LogLevel::level)) {        \
      ::rmsg::log_write(::rmsg::LogLevel::level, __VA_ARGS__); \
    }                                                          \
  } while (0)
