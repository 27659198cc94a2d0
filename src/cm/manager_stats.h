// ManagerStats: the connection manager's counters (docs/connection-manager.md names
// them). Shared (std::shared_ptr) with the hooks of streams that may outlive the manager.
// Loop-thread-only, like the manager.
#pragma once

#include <string>
#include <system_error>

#include "rmsg/connection_manager.h"
#include "rmsg/counters.h"

namespace rmsg::cm {

class ManagerStats {
 public:
  CounterSet& set() noexcept { return set_; }
  void add(const char* name, std::uint64_t n = 1) { set_.counter(name).add(n); }

  // A delivered connect: connects.ok and the phase sums of its mode, or
  // connects.failed.<cause>.
  void record(const ConnectReport& report, std::error_code ec);

  // The counter suffix of a setup error ("rejected", "address_timeout", ...).
  static std::string cause(std::error_code ec);

 private:
  CounterSet set_;
};

}  // namespace rmsg::cm
