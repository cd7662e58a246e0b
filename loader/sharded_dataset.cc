#include "loader/sharded_dataset.h"

#include <algorithm>

#include "loader/index_sampler.h"
#include "loader/sample_rng.h"

namespace feedscope {

std::vector<std::size_t> stream_shards(std::size_t shard_count, const ShardPlan& plan,
                                       std::size_t stream, std::size_t streams, std::uint64_t epoch) {
  std::vector<std::size_t> order;
  if (plan.shuffle) {
    order = seeded_permutation(shard_count, SampleRng::mix(SampleRng::mix(plan.seed) ^ epoch));
  } else {
    order.resize(shard_count);
    for (std::size_t i = 0; i < shard_count; ++i) order[i] = i;
  }
  std::vector<std::size_t> mine;
  const std::size_t world = std::max<std::size_t>(1, plan.world_size);
  const std::size_t n = std::max<std::size_t>(1, streams);
  std::size_t position = 0;  // among this rank's shards
  for (std::size_t i = plan.rank; i < order.size(); i += world, ++position)
    if (position % n == stream) mine.push_back(order[i]);
  return mine;
}

}  // namespace feedscope
