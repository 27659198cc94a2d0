// The registry behind rmsg::is_retryable and rmsg::error_kind (rmsg/result.h): every error
// category the library defines says which of its codes are retryable and what kind each
// is, in the accessor that makes the category (so the answer is registered before any code
// of that category can exist):
//
//   const std::error_category& connect_category() noexcept {
//     static const ConnectCategory category;
//     static const bool rule = register_retryable(category, retry_codes({ConnectErrc::...}),
//                                                 connect_kind);
//     return category;
//   }
//
// The rmsg (Errc) and the system and generic (errno) categories are built in (errors.cc).
// A category that registered nothing answers through the generic condition it maps to
// (default_error_condition), else "not retryable" and ErrorKind::other.
//
// Threading: any thread (a mutex; is_retryable is not on a data path).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <system_error>

#include "rmsg/result.h"

namespace rmsg {

// `codes`: bit c set when code c of `category` is retryable; codes of 64 and above never
// are. `kind_of`: the kind of a code (every int: codes the category does not define
// included); null: ErrorKind::other. A second registration of the same category replaces
// the first. Returns true (for a static's initializer).
using KindOf = ErrorKind (*)(int code) noexcept;
bool register_retryable(const std::error_category& category, std::uint64_t codes,
                        KindOf kind_of = nullptr) noexcept;

template <class E>
constexpr std::uint64_t retry_codes(std::initializer_list<E> codes) noexcept {
  std::uint64_t mask = 0;
  for (const E e : codes) mask |= std::uint64_t{1} << static_cast<unsigned>(e);
  return mask;
}

}  // namespace rmsg
