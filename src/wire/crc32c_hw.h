// The crc32-instruction implementation behind crc32c.h (crc32c_sse42.cc), internal to it.
// Raw register updates: no init, no final xor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace rmsg::wire::detail {

// Whether the CPU has SSE4.2's crc32 (always false off x86-64).
bool crc32c_hw_supported() noexcept;
// Only when crc32c_hw_supported().
std::uint32_t crc32c_update_hw(std::uint32_t reg, const std::byte* p, std::size_t n) noexcept;
// Finished CRCs (init and final xor applied) of n buffers, each from 0.
void crc32c_each_hw(const std::span<const std::byte>* parts, std::size_t n,
                    std::uint32_t* out) noexcept;

}  // namespace rmsg::wire::detail
