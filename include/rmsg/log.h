// A pluggable log hook. rmsg is silent by default: nothing is formatted or written until
// an application installs a handler. Handlers may be called from any loop thread, so
// they must be thread-safe; set_log_handler itself is thread-safe.
#pragma once

#include <functional>
#include <string_view>

namespace rmsg {

enum class LogLevel { debug = 0, info = 1, warn = 2, error = 3 };

using LogHandler = std::function<void(LogLevel, std::string_view message)>;

// Installs the handler (an empty function silences rmsg again) and the lowest level that
// reaches it.
void set_log_handler(LogHandler handler, LogLevel min_level = LogLevel::info);

// A ready-made handler that writes "rmsg LEVEL: message" lines to stderr.
void log_to_stderr(LogLevel level, std::string_view message);

const char* to_string(LogLevel level) noexcept;

namespace detail {
bool log_enabled(LogLevel level) noexcept;
void log_write(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
}  // namespace detail

}  // namespace rmsg

// printf-style; arguments are evaluated only when a handler would receive the message.
#define RMSG_LOG(level, ...)                                           \
  do {                                                                 \
    if (::rmsg::detail::log_enabled(::rmsg::LogLevel::level)) {        \
      ::rmsg::detail::log_write(::rmsg::LogLevel::level, __VA_ARGS__); \
    }                                                                  \
  } while (0)
