#pragma once
// Recordings made from fabricated GPU activity, the shapes a real device gives, until a lent GPU
// brings real ones: each case's records, the input `run` or `watch` would hand the diagnosis, and
// what they diagnosed, made by the functions `run` and `watch` call (summarize_measured_steps,
// diagnose; kernel_active_windows, summarize_program_activity, diagnose_watched). The fixtures
// under tests/fixtures/gpu/fabricated-* are these cases written by write_recording
// (RecordingFixturesTest regenerates them and checks that they match).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "exporters/recording.h"
#include "tests/support/diagnosis_scenarios.h"
#include "tests/support/sampled_activity.h"

namespace feedscope::testing {

struct RecordingCase {
  std::string name;  // the fixture directory's
  Recording recording;
  Replayed produced;  // what the run or watch diagnosed
  // Small enough for a fixture in the repository; the watch case's cap leaves records out.
  std::size_t max_records = kRecordMaxRecords;
};

inline constexpr std::int64_t kCaseUs = 1000;
inline constexpr std::int64_t kCaseMs = 1000 * kCaseUs;
// now_ns()-like timestamps: a steady clock some hours after boot.
inline constexpr std::int64_t kCaseOrigin = 7'200'000'000'000;

// `steps` step windows of `step_ns` from `first`, one after the other, each filled by `fill(a,
// begin, correlation)`; `warmup` steps before them, filled alike, that no window covers. Each
// step's span lasts `span_ns` (0: all but the 50 us of the wait for the next batch).
inline RecordedGpu fabricated_run_gpu(
    int warmup, int steps, std::int64_t step_ns,
    const std::function<void(GpuActivity&, std::int64_t, std::uint32_t&)>& fill,
    std::int64_t span_ns = 0) {
  RecordedGpu g;
  std::uint32_t correlation = 1;
  std::int64_t at = kCaseOrigin;
  for (int i = 0; i < warmup; ++i, at += step_ns) fill(g.activity, at, correlation);
  g.measured_begin_ns = at;
  for (int i = 0; i < steps; ++i, at += step_ns) {
    fill(g.activity, at, correlation);
    g.steps.push_back({at, at + (span_ns > 0 ? span_ns : step_ns - 50 * kCaseUs)});
  }
  return g;
}

inline Replayed produced_by_run(DiagnosisInput in, const RecordedGpu& g) {
  in.gpu_trace = summarize_measured_steps(g.activity, g.steps, g.steps_complete_until_ns, g.measured_begin_ns);
  return {diagnose(in), in.gpu_trace};
}

inline Replayed produced_by_watch(WatchDiagnosisInput in, const RecordedGpu& g) {
  in.gpu_trace = summarize_program_activity(g.activity, kernel_active_windows(g.activity));
  return {diagnose_watched(in), in.gpu_trace};
}

// A small MLP on a GPU: each 1 ms step launches 40 kernels of 5 us, one every 25 us, and syncs
// once for the loss (.item()); the device is idle 80 % of the step.
inline void launch_bound_step(GpuActivity& a, std::int64_t begin, std::uint32_t& corr) {
  for (int k = 0; k < 40; ++k) {
    const std::int64_t launch = begin + k * 23 * kCaseUs;
    a.runtime.push_back({"cudaLaunchKernel", launch, launch + 4 * kCaseUs, 1, corr});
    a.kernels.push_back({k % 2 ? "void at::native::vectorized_elementwise_kernel<4>()"
                               : "void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4>()",
                         launch + 10 * kCaseUs, launch + 15 * kCaseUs, 0, 7, corr});
    ++corr;
  }
  const std::int64_t sync = begin + 930 * kCaseUs;
  a.runtime.push_back({"cudaStreamSynchronize", sync, sync + 15 * kCaseUs, 1, corr});
  a.syncs.push_back({SyncType::stream, sync, sync + 15 * kCaseUs, 7, corr++});
}

// 200 ms steps: 400 MB from pageable memory at 2.5 GB/s (160 ms), then 20 ms of kernels.
inline void copy_bound_step(GpuActivity& a, std::int64_t begin, std::uint32_t& corr) {
  a.runtime.push_back({"cudaMemcpy", begin, begin + 160 * kCaseMs, 1, corr});
  a.memcpys.push_back({MemcpyKind::h2d, MemoryKind::pageable, 400'000'000, begin, begin + 160 * kCaseMs, 0, 7, corr++});
  a.runtime.push_back({"cudaLaunchKernel", begin + 161 * kCaseMs, begin + 161 * kCaseMs + 5 * kCaseUs, 1, corr});
  a.kernels.push_back({"sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32", begin + 165 * kCaseMs,
                       begin + 185 * kCaseMs, 0, 7, corr++});
}

inline RecordingCase launch_bound_run_case() {
  RecordingCase c;
  c.name = "fabricated-launch-bound";
  c.recording.fabricated_by = "tests/support/gpu_recording_cases.h: launch_bound_run_case()";
  const RecordedGpu g = fabricated_run_gpu(5, 60, 1 * kCaseMs, launch_bound_step);
  DiagnosisInput in = scenario(0.063, 60, 0.0, 0.0002, 0.00001, 0.00095, 2, 8, true);
  in.model_parameters = 3 * 100 + 100 + 100 * 3 + 3;
  in.pin_memory = true;
  in.utilization.gpu_util_ratio = 0.21;
  in.utilization.series["gpu0_util_ratio"] = SeriesStats{0.21, 0.3, 0.35};
  in.utilization.series["gpu0_memory_used_bytes"] = SeriesStats{1.2e9, 1.2e9, 1.2e9};
  c.recording.run = in;
  c.recording.gpu = g;
  c.produced = produced_by_run(in, g);
  return c;
}

inline RecordingCase copy_bound_run_case() {
  RecordingCase c;
  c.name = "fabricated-copy-bound";
  c.recording.fabricated_by = "tests/support/gpu_recording_cases.h: copy_bound_run_case()";
  const RecordedGpu g = fabricated_run_gpu(1, 10, 200 * kCaseMs, copy_bound_step);
  DiagnosisInput in = scenario(2.0, 10, 0.0, 0.002, 0.0, 0.200, 2, 8, true);
  in.pin_memory = false;
  in.utilization.gpu_util_ratio = 0.1;
  in.utilization.series["gpu0_util_ratio"] = SeriesStats{0.1, 0.12, 0.15};
  c.recording.run = in;
  c.recording.gpu = g;
  c.produced = produced_by_run(in, g);
  return c;
}

// A watched program of the launch-bound shape: its tree (a busy main thread, two idle workers)
// and its CUDA records, with no Session inside it.
inline RecordingCase launch_bound_watch_case() {
  RecordingCase c;
  c.name = "fabricated-watch-launch-bound";
  c.recording.fabricated_by = "tests/support/gpu_recording_cases.h: launch_bound_watch_case()";
  RecordedGpu g = fabricated_run_gpu(0, 2000, 1 * kCaseMs, launch_bound_step);
  g.steps.clear();  // watch has no step windows
  g.measured_begin_ns = 0;
  WatchDiagnosisInput in = tree_input(0.97, 2, 0.05, 0.2);
  in.tree.on_gpu = true;
  in.tree.processes.push_back({});
  WatchedProcess& p = in.tree.processes.back();
  p.pid = 100;
  p.name = "python3";
  p.role = ProcessRole::trainer;
  p.samples = 25;
  p.cpu_cores_mean = 0.97;
  p.main_thread_busy = 0.97;
  in.tree.samples = 25;
  in.tree.sampled_s = 2.5;
  in.ended = "exited";
  in.exit = "exited with 0";
  in.wall_s = 2.6;
  in.torch = ProgramTorch{"2.5.1+cu124", "/usr/lib/python3/dist-packages/torch/version.py"};
  c.recording.watch = in;
  c.recording.gpu = g;
  c.produced = produced_by_watch(in, g);
  c.max_records = 4000;
  return c;
}

// A lighter launch-bound step for a sampled trace: 8 kernels of 10 us in a 1 ms step, and the
// sync for the loss.
inline void light_launch_bound_step(GpuActivity& a, std::int64_t begin, std::uint32_t& corr) {
  for (int k = 0; k < 8; ++k) {
    const std::int64_t launch = begin + k * 60 * kCaseUs;
    a.runtime.push_back({"cudaLaunchKernel", launch, launch + 5 * kCaseUs, 1, corr});
    a.kernels.push_back({"void at::native::vectorized_elementwise_kernel<4>()", launch + 10 * kCaseUs,
                         launch + 20 * kCaseUs, 0, 7, corr++});
  }
  const std::int64_t sync = begin + 800 * kCaseUs;
  a.runtime.push_back({"cudaStreamSynchronize", sync, sync + 100 * kCaseUs, 1, corr++});
}

// The watched launch-bound program under sampled tracing (20 ms of every 200 after the first
// 100 ms, watch's 1/10 shrunk to fit a fixture): its recording carries the tracing mode and the
// windows, and replays to the verdict, with the totals scaled from the windows.
inline RecordingCase sampled_launch_bound_watch_case() {
  RecordingCase c = launch_bound_watch_case();
  c.name = "fabricated-watch-sampled-launch-bound";
  c.recording.fabricated_by = "tests/support/gpu_recording_cases.h: sampled_launch_bound_watch_case()";
  // It ends inside a window: a watched span ends at the last traced kernel, up to a period
  // before the program's last.
  const RecordedGpu whole = fabricated_run_gpu(0, 810, 1 * kCaseMs, light_launch_bound_step);
  constexpr TraceSampling kSampling{20 * kCaseMs, 200 * kCaseMs, 100 * kCaseMs};
  RecordedGpu g;
  g.activity = sampled_as(whole.activity, kSampling, kCaseOrigin, kCaseOrigin + 810 * kCaseMs);
  c.recording.watch->wall_s = 0.9;
  c.recording.gpu = g;
  c.produced = produced_by_watch(*c.recording.watch, g);
  return c;
}

inline std::vector<RecordingCase> fabricated_recording_cases() {
  return {launch_bound_run_case(), copy_bound_run_case(), launch_bound_watch_case(),
          sampled_launch_bound_watch_case()};
}

}  // namespace feedscope::testing
