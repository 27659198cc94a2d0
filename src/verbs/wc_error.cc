// The work-completion error category: ibv_wc_status values with the verbs' own messages.
#include <infiniband/verbs.h>

#include <string>

#include "rmsg/rdma.h"

namespace rmsg {
namespace {

class WcCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "rdma-wc"; }
  std::string message(int code) const override {
    return std::string("work completion: ") + ibv_wc_status_str(static_cast<ibv_wc_status>(code));
  }
};

}  // namespace

const std::error_category& wc_category() noexcept {
  static const WcCategory category;
  return category;
}

}  // namespace rmsg
