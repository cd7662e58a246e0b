#include "profiler/watch_diagnosis.h"

namespace feedscope {

Evidence evidence_of(const WatchDiagnosisInput& in) {
  Evidence e;
  e.cpus = in.cpus;
  e.utilization = in.utilization;
  e.tree = in.tree;
  e.gpu_trace = in.gpu_trace;
  e.torch = in.torch;
  e.end = ProgramEnd{in.ended, in.exit, in.wall_s};
  e.printed = in.printed;
  e.data_files_seen = in.data_files_seen;
  e.data_kind = in.data_kind;
  e.samples = in.samples;
  if (!in.spans) return e;
  e.loop = static_cast<const LoopSpans&>(*in.spans);
  e.trials = in.spans->trials;
  e.autotune = in.spans->autotune;
  if (!e.samples) e.samples = in.spans->samples;  // a Session over feedscope.DataLoader
  // The trace has one window, the CUDA-active time: its per-step figures are per the program's
  // measured steps, which cover about the same time.
  if (e.gpu_trace && e.loop->batches > 0) {
    GpuTraceSummary& g = *e.gpu_trace;
    g.steps = e.loop->batches;
    g.kernels_per_step = static_cast<double>(g.kernels) / static_cast<double>(g.steps);
    g.syncs_per_step = static_cast<double>(g.syncs) / static_cast<double>(g.steps);
  }
  return e;
}

Diagnosis diagnose_watched(const WatchDiagnosisInput& in) { return diagnose(evidence_of(in)); }

}  // namespace feedscope
