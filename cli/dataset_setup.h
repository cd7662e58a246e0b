#pragma once
// The dataset and the loader that a run's config names, built the one way that `feedscope run`,
// feedscope.DataLoader and feedscope::Loader (api/handed_loader.h) use. Torch-free, like config.h:
// the Python client links these two without libtorch.
#include <memory>

#include "cli/config.h"
#include "loader/batch_loader.h"
#include "loader/dataset.h"

namespace feedscope {

// Opens the dataset the config names. Throws DatasetError naming the value.
std::shared_ptr<const DataSource> open_dataset(const RunConfig& config);

// The loader options the config names: num_workers, batch_size, prefetch (either may be auto:
// kAuto, within max_workers and ram_budget_mib), drop_last, bad_sample, max_bad_ratio. pin_memory is the caller's (it pins only where a device copy follows).
LoaderOptions loader_options(const RunConfig& config);

// A BatchLoader over `dataset` with the config's order: a shard dataset's ShardPlan (rank,
// world_size, shuffle, seed, shuffle_buffer), else an index sampler (DistributedSampler for
// world_size > 1, seeded random with shuffle, else sequential). Throws ConfigError for a bad
// placement, and as BatchLoader's constructors do.
std::unique_ptr<BatchLoader> make_batch_loader(const RunConfig& config,
                                               std::shared_ptr<const DataSource> dataset,
                                               const LoaderOptions& options, SpanRegistry* spans);

}  // namespace feedscope
