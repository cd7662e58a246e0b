// The metrics address of one rank among several on a machine (exporters/rank_address.h).
#include "exporters/rank_address.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace feedscope {
namespace {

RankIdentity rank_of(std::optional<int> rank, std::optional<int> local_rank, const std::string& source = "torch") {
  RankIdentity id;
  id.rank = rank;
  id.local_rank = local_rank;
  id.world_size = 8;
  id.source = source;
  return id;
}

TEST(RankAddressTest, ThePortGainsTheLocalRank) {
  const RankAddress a = metrics_address_of_rank("0.0.0.0:9464", rank_of(5, 1, "slurm"));
  EXPECT_EQ(a.address, "0.0.0.0:9465");
  EXPECT_EQ(a.port_offset, 1);
  EXPECT_EQ(a.how, "port 9464 + local rank 1 (slurm), so that the ranks of one machine do not share a port");
  EXPECT_EQ(metrics_address_of_rank("[::1]:9464", rank_of(2, 2)).address, "[::1]:9466");
  // Without a local rank (PMI_RANK alone), the rank.
  EXPECT_EQ(metrics_address_of_rank("127.0.0.1:9464", rank_of(3, std::nullopt, "pmi")).address, "127.0.0.1:9467");
}

TEST(RankAddressTest, LocalRankZeroNoRankAndPortZeroKeepTheAddress) {
  EXPECT_EQ(metrics_address_of_rank("127.0.0.1:9464", rank_of(4, 0)).address, "127.0.0.1:9464");
  EXPECT_EQ(metrics_address_of_rank("127.0.0.1:9464", RankIdentity{}).address, "127.0.0.1:9464");
  EXPECT_EQ(metrics_address_of_rank("127.0.0.1:0", rank_of(1, 1)).address, "127.0.0.1:0");
  EXPECT_EQ(metrics_address_of_rank("not an address", rank_of(1, 1)).address, "not an address")
      << "the endpoint names a malformed address";
}

TEST(RankAddressTest, ThePlaceholderIsReplacedAndNothingAdded) {
  const RankAddress a = metrics_address_of_rank("127.0.0.1:94{local_rank}0", rank_of(13, 3));
  EXPECT_EQ(a.address, "127.0.0.1:9430");
  EXPECT_EQ(a.port_offset, 0);
  EXPECT_THROW(metrics_address_of_rank("127.0.0.1:946{local_rank}", RankIdentity{}), std::invalid_argument);
}

TEST(RankAddressTest, APortPast65535IsRefusedNamingIt) {
  try {
    metrics_address_of_rank("0.0.0.0:65530", rank_of(7, 7));
    FAIL() << "port 65537 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "metrics_addr: \"0.0.0.0:65530\" of local rank 7 listens on port 65530 + 7 = 65537, "
                           "past 65535: give a lower port, or {local_rank} where the port's digits go");
  }
  EXPECT_EQ(metrics_address_of_rank("0.0.0.0:65528", rank_of(7, 7)).address, "0.0.0.0:65535");
}

}  // namespace
}  // namespace feedscope
