// A build without RDMA (RMSG_WITH_RDMA=OFF) still defines rmsg/rdma_errors.h: the categories
// exist, so code that inspects an error links and runs; nothing in such a build reports one.
#include <string>

#include "base/retry_rules.h"
#include "rmsg/rdma_errors.h"

namespace rmsg {
namespace {

class UnavailableCategory final : public std::error_category {
 public:
  UnavailableCategory(const char* name, const char* what) : name_(name), what_(what) {}
  const char* name() const noexcept override { return name_; }
  std::string message(int code) const override {
    return std::string(what_) + " " + std::to_string(code) + " (rmsg built without RDMA)";
  }

 private:
  const char* name_;
  const char* what_;
};

// rdma_errors.h: each of these failed the device's work (ErrorKind::device).
ErrorKind device_kind(int) noexcept {
  return ErrorKind::device;
}

}  // namespace

const std::error_category& wc_category() noexcept {
  static const UnavailableCategory category("rdma-wc", "work completion");
  static const bool rule = register_retryable(category, 0, device_kind);  // rdma_errors.h: none
  static_cast<void>(rule);
  return category;
}

const std::error_category& async_event_category() noexcept {
  static const UnavailableCategory category("rdma-async-event", "device event");
  static const bool rule = register_retryable(category, 0, device_kind);  // rdma_errors.h: none
  static_cast<void>(rule);
  return category;
}

std::error_code memlock_limit_error() noexcept {
  static const UnavailableCategory category("rdma-memlock", "memlock limit");
  static const bool rule = register_retryable(category, 0, device_kind);  // rdma_errors.h: none
  static_cast<void>(rule);
  return {1, category};
}

}  // namespace rmsg
