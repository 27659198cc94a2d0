#include "rmsg/log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <memory>
#include <mutex>

namespace rmsg {
namespace {

struct LogState {
  std::mutex mu;
  std::shared_ptr<const LogHandler> handler;
};

LogState& state() {
  static LogState s;
  return s;
}

// -1: silent. Checked without the lock on every RMSG_LOG, so logging costs one relaxed
// load while no handler is installed.
std::atomic<int> g_min_level{-1};

}  // namespace

const char* to_string(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::debug:
      return "debug";
    case LogLevel::info:
      return "info";
    case LogLevel::warn:
      return "warn";
    case LogLevel::error:
      return "error";
  }
  return "?";
}

void set_log_handler(LogHandler handler, LogLevel min_level) {
  auto& s = state();
  std::lock_guard lock(s.mu);
  if (handler) {
    s.handler = std::make_shared<const LogHandler>(std::move(handler));
    g_min_level.store(static_cast<int>(min_level), std::memory_order_release);
  } else {
    s.handler.reset();
    g_min_level.store(-1, std::memory_order_release);
  }
}

void log_to_stderr(LogLevel level, std::string_view message) {
  std::fprintf(stderr, "rmsg %s: %.*s\n", to_string(level), static_cast<int>(message.size()),
               message.data());
}

bool log_enabled(LogLevel level) noexcept {
  const int min = g_min_level.load(std::memory_order_acquire);
  return min >= 0 && static_cast<int>(level) >= min;
}

void log_write(LogLevel level, const char* fmt, ...) {
  std::shared_ptr<const LogHandler> handler;
  {
    auto& s = state();
    std::lock_guard lock(s.mu);
    handler = s.handler;
  }
  if (!handler) return;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  const int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  const auto len =
      static_cast<std::size_t>(n) < sizeof buf ? static_cast<std::size_t>(n) : sizeof buf - 1;
  (*handler)(level, std::string_view(buf, len));
}

}  // namespace rmsg
