#pragma once
// The fix a cpu_preprocess diagnosis of a watched program offers, measured before it is offered:
// feedscope's loader (what feedscope.DataLoader runs) on the program's own files, found in its
// open files while it ran (profiler/data_files.h), for a few seconds once it has ended, at its
// worker count. The report says what was measured and on which files (program.try_loader), and the
// recommendation gives the rate beside the num_workers advice.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "profiler/data_files.h"
#include "profiler/report.h"

namespace feedscope {

struct LoaderTrySetup {
  bool enabled = true;          // --no-try-loader: off
  int num_workers = 0;          // the program's loader workers (0: it loads in its own thread)
  std::int64_t batch_size = 0;  // the program's, where known; 0: 64
  std::string batch_size_from;  // where that came from ("`-b 32` on its command line")
  std::int64_t image_size = 0;  // the program's crop, where its command line says it; 0: 224
  std::string image_size_from;
  double seconds = 3;
};

// Where `report`'s diagnosis is cpu_preprocess: sets report.program->try_loader (what was measured,
// or why nothing was) and, where feedscope's loader was faster than the program, adds the
// recommendation. Never throws: a dataset that does not open is a `skipped` reason.
void offer_feedscope_loader(const DataFilesSeen& seen, const LoaderTrySetup& setup, Report& report);

// Samples per second of feedscope's loader on `dataset` (train pipeline, `image_size`), over
// `seconds` after one warm-up batch. Throws what opening the dataset throws.
// Each sample's load time on a watched program's files, measured with feedscope's decoder in one
// thread (no worker beside it) once the program has ended, the files in a seeded random order,
// for up to `seconds` or `max_samples` (a small folder: each file once): the program's own
// per-sample times are not visible from outside. Only for an images:DIR that `seen` found; none
// otherwise, or where the folder does not open (said in `notes`).
std::optional<SampleCosts> measure_program_sample_costs(const DataFilesSeen& seen, double seconds,
                                                        std::size_t max_samples,
                                                        std::vector<std::string>& notes);

double measure_feedscope_loader(const std::string& dataset, int num_workers,
                                std::int64_t batch_size, std::int64_t image_size, double seconds);

}  // namespace feedscope
