// Linking the upgrade engine into a program that uses the socket API in-process (rmsg's own
// tests) installs it: the engine makes its calls through this process's g_real.
#include "posix/upgrade.h"
#include "posix/upgrade_conn.h"

namespace rmsg::posix {
namespace {

[[maybe_unused]] const bool installed = [] {
  g_engine_real = &g_real;
  g_upgrade_hooks.store(&kUpgradeHooks, std::memory_order_release);
  return true;
}();

}  // namespace
}  // namespace rmsg::posix
