#pragma once
// CRC32C (Castagnoli), the checksum of the records format. The SSE4.2 instruction computes it at
// several GB/s where zlib's CRC32 (the ISO-HDLC polynomial, no instruction) managed 1.4 GB/s and
// made checksumming the records reader's bottleneck.
#include <cstddef>
#include <cstdint>

namespace feedscope::detail {

// Extends `crc` (a finished CRC32C, 0 to start) over `bytes` bytes: crc32c(b, crc32c(a)) is the
// CRC32C of a followed by b. Uses the CPU instruction where there is one.
std::uint32_t crc32c(const void* data, std::size_t bytes, std::uint32_t crc = 0) noexcept;
// The table-driven fallback, exposed so tests check both paths agree.
std::uint32_t crc32c_portable(const void* data, std::size_t bytes, std::uint32_t crc = 0) noexcept;
bool crc32c_hardware() noexcept;

}  // namespace feedscope::detail
