#include "loader/detail/crc32c.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace feedscope::detail {
namespace {

TEST(Crc32cTest, KnownVectors) {
  // The CRC32C check value (RFC 3720 / iSCSI) and the all-zero and all-one 32-byte vectors of
  // RFC 3720 B.4.
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c_portable("123456789", 9), 0xE3069283u);
  const std::vector<unsigned char> zeros(32, 0), ones(32, 0xFF);
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones.data(), ones.size()), 0x62A8AB43u);
  EXPECT_EQ(crc32c("", 0), 0u);
}

TEST(Crc32cTest, HardwareAndPortableAgreeAndExtendInPieces) {
  std::mt19937 rng(5);
  std::vector<unsigned char> data(4099);
  for (auto& b : data) b = static_cast<unsigned char>(rng());
  for (std::size_t n : {0u, 1u, 7u, 8u, 31u, 32u, 33u, 1000u, 4099u}) {
    const std::uint32_t whole = crc32c(data.data(), n);
    EXPECT_EQ(whole, crc32c_portable(data.data(), n)) << n << " bytes";
    for (std::size_t cut : {std::size_t{0}, n / 3, n}) {
      EXPECT_EQ(crc32c(data.data() + cut, n - cut, crc32c(data.data(), cut)), whole)
          << n << " bytes cut at " << cut;
    }
  }
  if (!crc32c_hardware()) GTEST_SKIP() << "no CRC32C instruction: only the portable path ran";
}

}  // namespace
}  // namespace feedscope::detail
