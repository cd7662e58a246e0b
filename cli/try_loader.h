#pragma once
// The fix a cpu_preprocess diagnosis of a watched program offers, measured before it is offered:
// feedscope's loader (what feedscope.DataLoader runs) on the program's own files, found in its
// open files while it ran (profiler/data_files.h), for a few seconds once it has ended, at its
// worker count. The report says what was measured and on which files (program.try_loader), and the
// recommendation gives the rate beside the num_workers advice.
#include <cstdint>
#include <string>

#include "profiler/data_files.h"
#include "profiler/report.h"

namespace feedscope {

struct LoaderTrySetup {
  bool enabled = true;          // --no-try-loader: off
  int num_workers = 0;          // the program's loader workers (0: it loads in its own thread)
  std::int64_t batch_size = 0;  // the program's, where known; 0: 64
  double seconds = 3;
};

// Where `report`'s diagnosis is cpu_preprocess: sets report.program->try_loader (what was measured,
// or why nothing was) and, where feedscope's loader was faster than the program, adds the
// recommendation. Never throws: a dataset that does not open is a `skipped` reason.
void offer_feedscope_loader(const DataFilesSeen& seen, const LoaderTrySetup& setup, Report& report);

// Samples per second of feedscope's loader on `dataset` (train pipeline, `image_size`), over
// `seconds` after one warm-up batch. Throws what opening the dataset throws.
double measure_feedscope_loader(const std::string& dataset, int num_workers,
                                std::int64_t batch_size, std::int64_t image_size, double seconds);

}  // namespace feedscope
