#include "loader/detail/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace feedscope::detail {

namespace {

constexpr std::uint32_t kPolynomial = 0x82F63B78u;  // Castagnoli, bit-reflected

constexpr std::array<std::uint32_t, 256> make_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPolynomial : c >> 1;
    table[i] = c;
  }
  return table;
}
constexpr std::array<std::uint32_t, 256> kTable = make_table();

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) std::uint32_t extend_sse42(std::uint32_t crc,
                                                             const unsigned char* p,
                                                             std::size_t n) noexcept {
  std::uint64_t c = crc;
  for (; n >= 32; n -= 32, p += 32) {
    std::uint64_t v[4];
    std::memcpy(v, p, sizeof v);
    c = _mm_crc32_u64(c, v[0]);
    c = _mm_crc32_u64(c, v[1]);
    c = _mm_crc32_u64(c, v[2]);
    c = _mm_crc32_u64(c, v[3]);
  }
  for (; n >= 8; n -= 8, p += 8) {
    std::uint64_t v;
    std::memcpy(&v, p, sizeof v);
    c = _mm_crc32_u64(c, v);
  }
  auto c32 = static_cast<std::uint32_t>(c);
  for (; n > 0; --n, ++p) c32 = _mm_crc32_u8(c32, *p);
  return c32;
}
#endif

std::uint32_t extend_portable(std::uint32_t crc, const unsigned char* p, std::size_t n) noexcept {
  for (; n > 0; --n, ++p) crc = kTable[(crc ^ *p) & 0xFF] ^ (crc >> 8);
  return crc;
}

}  // namespace

bool crc32c_hardware() noexcept {
#if defined(__x86_64__)
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
#else
  return false;
#endif
}

std::uint32_t crc32c_portable(const void* data, std::size_t bytes, std::uint32_t crc) noexcept {
  return ~extend_portable(~crc, static_cast<const unsigned char*>(data), bytes);
}

std::uint32_t crc32c(const void* data, std::size_t bytes, std::uint32_t crc) noexcept {
#if defined(__x86_64__)
  if (crc32c_hardware())
    return ~extend_sse42(~crc, static_cast<const unsigned char*>(data), bytes);
#endif
  return crc32c_portable(data, bytes, crc);
}

}  // namespace feedscope::detail
