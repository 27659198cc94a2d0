// librmsg-upgrade.so: the upgrade engine as a module that the preload dlopen()s when
// RMSG_UPGRADE=on (runtime.cc), so that librmsg-preload.so itself stays libc-only. Its one
// export hands the engine the preload's C library calls and returns the hooks.
#include "posix/upgrade.h"
#include "posix/upgrade_conn.h"

extern "C" __attribute__((visibility("default"))) const void* rmsg_upgrade_module(
    const void* real) {
  rmsg::posix::g_engine_real = static_cast<const rmsg::posix::RealCalls*>(real);
  return &rmsg::posix::kUpgradeHooks;
}
