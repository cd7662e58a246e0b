#include "cli/try_loader.h"

#include <algorithm>
#include <cstdio>
#include <exception>

#include "cli/dataset_setup.h"
#include "loader/span_recorder.h"
#include "profiler/slow_samples.h"

namespace feedscope {

double measure_feedscope_loader(const std::string& dataset, int num_workers,
                                std::int64_t batch_size, std::int64_t image_size, double seconds) {
  RunConfig c;
  c.dataset = dataset;
  c.num_workers = num_workers;
  c.batch_size = batch_size;
  c.image_size = image_size;
  c.rank = 0;
  c.world_size = 1;
  const auto source = open_dataset(c);
  LoaderOptions lo = loader_options(c);
  lo.prefetch_next_epoch = true;
  const auto loader = make_batch_loader(c, source, lo, nullptr);
  const auto deadline_ns = static_cast<std::int64_t>(seconds * 1e9);
  std::int64_t samples = 0, begin = 0, epoch = 0;
  for (bool warm = false;;) {
    std::optional<Batch> batch = loader->next();
    if (!batch) {
      loader->begin_epoch(static_cast<std::uint64_t>(++epoch));
      continue;
    }
    if (!warm) {  // the first batch pays for the workers' start and the first files' cold reads
      warm = true;
      begin = now_ns();
      continue;
    }
    samples += batch->size;
    if (now_ns() - begin >= deadline_ns) break;
  }
  return static_cast<double>(samples) / (static_cast<double>(now_ns() - begin) / 1e9);
}

std::optional<SampleCosts> measure_program_sample_costs(const DataFilesSeen& seen, double seconds,
                                                        std::size_t max_samples,
                                                        std::vector<std::string>& notes) {
  const std::optional<std::string> dataset = seen.dataset();
  if (!dataset || !dataset->starts_with("images:")) return std::nullopt;
  RunConfig c;
  c.dataset = *dataset;
  c.num_workers = 0;  // in this thread: each sample's time is its own, no worker beside it
  c.batch_size = 16;
  c.rank = 0;
  c.world_size = 1;
  try {
    const auto source = open_dataset(c);
    const auto loader = make_batch_loader(c, source, loader_options(c), nullptr);
    const auto deadline = now_ns() + static_cast<std::int64_t>(seconds * 1e9);
    std::size_t samples = 0;
    // One epoch at most: every file once, in a random order, so a folder too large for the time
    // is measured on an even share of it.
    while (samples < max_samples && now_ns() < deadline) {
      const std::optional<Batch> batch = loader->next();
      if (!batch) break;
      samples += static_cast<std::size_t>(batch->size);
    }
    return sample_costs_of(loader->sample_costs(),
                           "feedscope's decoder on the program's files after it ended, not the "
                           "program's own loading",
                           static_cast<int>(c.image_size));
  } catch (const std::exception& e) {
    notes.push_back("per-sample costs not measured: " + *dataset + ": " + e.what());
    return std::nullopt;
  }
}

namespace {

std::string rate(double samples_per_s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.0f", samples_per_s);
  return text;
}

std::string ratio_text(double r) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1fx", r);
  return text;
}

Recommendation recommend(const LoaderTry& t) {
  Recommendation r;
  r.action = "Load with feedscope's loader: feedscope.DataLoader on your files: " +
             rate(*t.samples_per_s) + " samples/s measured";
  if (t.ratio)
    r.action += ", " + ratio_text(*t.ratio) + " the program's " + rate(*t.program_samples_per_s) +
                " samples/s";
  r.action += " (" + std::to_string(t.num_workers) + " worker(s), batch " +
              std::to_string(t.batch_size) + " (" + t.batch_size_from + "), image size " +
              std::to_string(t.image_size) + " (" + t.image_size_from + "))";
  r.setting = "feedscope.DataLoader(\"" + t.dataset + "\", batch_size=" + std::to_string(t.batch_size) +
              ", num_workers=" + std::to_string(t.num_workers) + ", pipeline=\"train\", image_size=" +
              std::to_string(t.image_size) + ")";
  r.basis = "measured: feedscope's loader alone on the program's files for " + rate(t.seconds) +
            " s after it ended; the job's rate also depends on its step, so no prediction";
  return r;
}

}  // namespace

void offer_feedscope_loader(const DataFilesSeen& seen, const LoaderTrySetup& setup, Report& report) {
  if (!report.program || report.diagnosis.bottleneck != "cpu_preprocess") return;
  LoaderTry& t = report.program->try_loader.emplace();
  t.num_workers = setup.num_workers;
  t.batch_size = setup.batch_size > 0 ? setup.batch_size : 64;
  t.batch_size_from = setup.batch_size > 0 ? setup.batch_size_from
                                           : "feedscope's default: the program's is not seen";
  t.image_size = setup.image_size > 0 ? setup.image_size : 224;
  t.image_size_from = setup.image_size > 0 ? setup.image_size_from
                                           : "feedscope's default: the program's command line "
                                             "names no crop size";
  const std::vector<std::string> files = seen.files();
  t.files_seen.assign(files.begin(), files.begin() + std::min<std::ptrdiff_t>(5, std::ssize(files)));
  if (!files.empty()) t.files_from = seen.from_arguments() ? "command line" : "open files";
  if (!setup.enabled) {
    t.skipped = "--no-try-loader";
    return;
  }
  // Only feedscope's own loader sends read and decode spans (a Session refuses the fixed names for
  // a stage of the user's): the program loads with it already.
  const bool own_loader = std::any_of(report.stages.begin(), report.stages.end(), [](const StageStats& s) {
    return (s.name == "read" || s.name == "decode") && s.busy_s > 0;
  });
  if (own_loader) {
    t.skipped = "the program loads with feedscope's loader already (its spans have read and decode)";
    return;
  }
  const std::optional<std::string> dataset = seen.dataset();
  if (!dataset) {
    t.skipped = "no data files seen open in the program's processes, nor named on its command line "
                "(images, .tar or TFRecord)";
    return;
  }
  t.dataset = *dataset;
  try {
    t.samples_per_s = measure_feedscope_loader(t.dataset, t.num_workers, t.batch_size,
                                               t.image_size, setup.seconds);
    t.seconds = setup.seconds;
  } catch (const std::exception& e) {
    t.skipped = std::string("feedscope's loader could not load ") + t.dataset + ": " + e.what();
    return;
  }
  std::string fact = "feedscope's loader on the program's files (" + t.dataset +
                     (t.files_from == "command line" ? ", named on its command line" : "") + ", " +
                     std::to_string(t.num_workers) + " worker(s), batch " +
                     std::to_string(t.batch_size) + ", image size " + std::to_string(t.image_size) +
                     ", after it ended): " +
                     rate(*t.samples_per_s) + " samples/s";
  if (report.throughput.samples_per_s > 0) {
    t.program_samples_per_s = report.throughput.samples_per_s;
    t.ratio = *t.samples_per_s / *t.program_samples_per_s;
    fact += ", " + ratio_text(*t.ratio) + " the program's";
  }
  report.diagnosis.evidence.push_back(fact);
  if (t.ratio && *t.ratio <= 1.0) return;  // not faster here: measured and said, not recommended
  report.diagnosis.recommendations.push_back(recommend(t));
}

}  // namespace feedscope
