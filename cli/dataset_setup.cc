#include "cli/dataset_setup.h"

#include "loader/image_folder_dataset.h"
#include "loader/index_sampler.h"
#include "loader/record_dataset.h"
#include "loader/synthetic_dataset.h"
#include "loader/tfrecord_dataset.h"
#include "loader/webdataset_dataset.h"

namespace feedscope {

namespace {

ImageFolderDataset::Options image_options(const RunConfig& config) {
  ImageFolderDataset::Options o;
  o.train = config.image_pipeline != "eval";
  o.size = static_cast<int>(config.image_size);
  o.reduced_decode = config.reduced_decode;
  o.seed = static_cast<std::uint64_t>(config.seed);
  return o;
}

}  // namespace

std::shared_ptr<const DataSource> open_dataset(const RunConfig& config) {
  const std::string& spec = config.dataset;
  const std::size_t colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  if (kind == "synthetic") {
    SyntheticDataset::Options o;
    o.shape = parse_shape(spec.substr(colon + 1));
    o.count = static_cast<std::size_t>(config.synthetic_samples);
    o.classes = config.classes;
    o.seed = static_cast<std::uint64_t>(config.seed);
    return std::make_shared<SyntheticDataset>(o);
  }
  if (kind == "records") return std::make_shared<RecordDataset>(spec.substr(colon + 1));
  if (kind == "images") {
    ImageFolderDataset::Options o = image_options(config);
    o.root = spec.substr(colon + 1);
    return std::make_shared<ImageFolderDataset>(o);
  }
  if (kind == "webdataset") {
    WebDataset::Options o;
    o.pattern = spec.substr(colon + 1);
    o.image = image_options(config);
    o.classes = config.classes;
    o.label_key = config.label_key;
    return std::make_shared<WebDataset>(o);
  }
  if (kind == "tfrecord") {
    TfRecordDataset::Options o;
    o.pattern = spec.substr(colon + 1);
    o.image = image_options(config);
    o.classes = config.classes;
    return std::make_shared<TfRecordDataset>(o);
  }
  throw DatasetError("dataset: '" + spec + "': unknown kind '" + kind +
                     "'; allowed: images:DIR | webdataset:PATTERN | tfrecord:PATTERN | records:DIR | synthetic:SHAPE");
}

LoaderOptions loader_options(const RunConfig& config) {
  LoaderOptions lo;
  lo.num_workers = static_cast<int>(config.num_workers);
  lo.batch_size = static_cast<int>(config.batch_size);
  lo.prefetch = static_cast<int>(config.prefetch);
  lo.autotune.max_workers = static_cast<int>(config.max_workers);
  lo.autotune.ram_budget_bytes = static_cast<std::uint64_t>(config.ram_budget_mib) << 20;
  lo.drop_last = config.drop_last;
  lo.bad_sample = config.bad_sample == "skip" ? BadSamplePolicy::skip : BadSamplePolicy::fail;
  lo.max_bad_ratio = config.max_bad_ratio;
  return lo;
}

std::unique_ptr<BatchLoader> make_batch_loader(const RunConfig& config,
                                               std::shared_ptr<const DataSource> dataset,
                                               const LoaderOptions& options, SpanRegistry* spans) {
  const Placement placement = resolve_placement(config);
  if (auto sharded = std::dynamic_pointer_cast<const ShardedDataset>(dataset)) {
    ShardPlan plan;
    plan.rank = static_cast<std::size_t>(placement.rank);
    plan.world_size = static_cast<std::size_t>(placement.world_size);
    plan.shuffle = config.shuffle;
    plan.seed = static_cast<std::uint64_t>(config.seed);
    plan.shuffle_buffer = static_cast<std::size_t>(config.shuffle_buffer);
    return std::make_unique<BatchLoader>(std::move(sharded), plan, options, spans);
  }
  auto indexed = std::dynamic_pointer_cast<const Dataset>(dataset);
  std::shared_ptr<const IndexSampler> order;
  const auto seed = static_cast<std::uint64_t>(config.seed);
  if (placement.world_size > 1)
    order = std::make_shared<DistributedSampler>(
        indexed->size(), static_cast<std::size_t>(placement.rank),
        static_cast<std::size_t>(placement.world_size), config.shuffle, seed, config.sampler_drop_last);
  else if (config.shuffle)
    order = std::make_shared<RandomSampler>(indexed->size(), seed);
  else
    order = std::make_shared<SequentialSampler>(indexed->size());
  return std::make_unique<BatchLoader>(std::move(indexed), std::move(order), options, spans);
}

}  // namespace feedscope
