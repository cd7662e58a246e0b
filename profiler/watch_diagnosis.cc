#include "profiler/watch_diagnosis.h"

namespace feedscope {

namespace {

// The trace's per-step figures are per CUDA-active window (one, mostly); a Session's batches are
// the program's steps. Each figure becomes its rate over the traced time times the loop's time per
// batch, so that the trace's span and the Session's window need not be the same stretch.
void per_batch(const LoopSpans& loop, GpuTraceSummary& g) {
  if (g.step_wall_s <= 0) return;
  const double batch_s = loop.wall_s / static_cast<double>(loop.batches);
  const double per_s = batch_s / g.step_wall_s;
  g.device_s_per_step = g.device_s_per_step * static_cast<double>(g.steps) * per_s;
  g.kernels_per_step = static_cast<double>(g.kernels) * per_s;
  g.syncs_per_step = static_cast<double>(g.syncs) * per_s;
  g.steps = loop.batches;
}

}  // namespace

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
  if (e.gpu_trace && e.loop->batches > 0 && e.loop->wall_s > 0) per_batch(*e.loop, *e.gpu_trace);
  return e;
}

Diagnosis diagnose_watched(const WatchDiagnosisInput& in) { return diagnose(evidence_of(in)); }

}  // namespace feedscope
