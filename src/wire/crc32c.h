// CRC-32C (Castagnoli), the checksum of every messenger banner, preamble and segment
// (docs/protocol.md, Messenger: CRC32C). Parameters, as in iSCSI (RFC 3720 B.4), ext4, msgr2:
//   polynomial 0x1EDC6F41 (reflected 0x82F63B78), input and output reflected,
//   init 0xFFFFFFFF, final xor 0xFFFFFFFF, check value crc32c("123456789") == 0xE3069283.
//
// crc32c(data, crc) continues a finished CRC: crc32c(b, crc32c(a)) == crc32c(a ++ b), and
// crc32c({}) == 0, so a CRC over scattered parts is a fold over them starting at 0.
//
// Implementations: the CPU's crc32 instruction (SSE4.2, x86-64) when the CPU has it,
// detected once at run time (only that one function is compiled for SSE4.2, so the library
// still runs on any x86-64), else a portable slicing-by-8. The environment variable
// RMSG_CRC32C=portable, read once at first use, forces the portable one (to compare, or to
// rule the instruction out). Both give the same values for every input (tests/wire).
//
// Threading: any thread; pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace rmsg::wire {

// The CRC of `data` continued from `crc` (a finished CRC; 0 to start).
std::uint32_t crc32c(std::span<const std::byte> data, std::uint32_t crc = 0) noexcept;

// The CRC of each of `parts` (each from 0: out[i] == crc32c(parts[i])), in one call: a
// frame's parts cost one dispatch and one call instead of one each (the per-message path
// CRCs three parts of every frame it writes and two of every frame it reads).
void crc32c_each(std::span<const std::span<const std::byte>> parts, std::uint32_t* out) noexcept;

enum class Crc32cImpl { portable, sse42 };

// What crc32c() uses in this process (fixed at its first use).
Crc32cImpl crc32c_impl() noexcept;
const char* crc32c_impl_name(Crc32cImpl impl) noexcept;  // "portable", "sse4.2"

// Whether this CPU has the crc32 instruction (whatever RMSG_CRC32C says).
bool crc32c_hw_available() noexcept;

// The two implementations, directly (tests, benchmarks). crc32c_hw only when
// crc32c_hw_available(); elsewhere it falls back to the portable one.
std::uint32_t crc32c_portable(std::span<const std::byte> data, std::uint32_t crc = 0) noexcept;
std::uint32_t crc32c_hw(std::span<const std::byte> data, std::uint32_t crc = 0) noexcept;

}  // namespace rmsg::wire
