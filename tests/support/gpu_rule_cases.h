#pragma once
// A fabricated recording for each GPU rule (and each of tree_gpu_trace's findings) that no device
// run has recorded yet, so that GpuFixturesTest replays every GPU rule's firing: the shape a real
// device gives that rule, made by the functions `run` and `watch` call. Each is written under
// tests/fixtures/gpu/fabricated-* and marked in its expect.json (fabricated_by); a recording from a
// lent GPU that fires the same rule replaces it (docs/gpu.md#recordings).
#include <string>
#include <vector>

#include "tests/support/gpu_recording_cases.h"

namespace feedscope::testing {

// A watched training process (pid 100) with `workers` loader workers, as the tree reads it.
inline WatchDiagnosisInput watched_trainer(double main_busy, int workers, double worker_busy, double system_busy) {
  WatchDiagnosisInput in = tree_input(main_busy, workers, worker_busy, system_busy);
  in.tree.on_gpu = true;
  WatchedProcess p;
  p.pid = 100;
  p.name = "python3";
  p.role = ProcessRole::trainer;
  p.samples = 50;
  p.cpu_cores_mean = main_busy;
  p.main_thread_busy = main_busy;
  in.tree.processes.push_back(p);
  in.tree.samples = 50;
  in.tree.sampled_s = 5;
  in.ended = "exited";
  in.exit = "exited with 0";
  in.wall_s = 5.2;
  in.torch = ProgramTorch{"2.11.0+cu130", "/opt/torch/lib/python3.12/site-packages/torch/version.py"};
  return in;
}

inline void launch(GpuActivity& a, const char* kernel, std::int64_t at, std::int64_t start, std::int64_t end,
                   std::uint32_t& corr, std::uint32_t device = 0, std::uint32_t stream = 7) {
  a.runtime.push_back({"cudaLaunchKernel", at, at + 5 * kCaseUs, 1, corr});
  a.kernels.push_back({kernel, start, end, device, stream, corr++});
}

// A case made here, by `made_by`, of the GPU records `g`; its run or its watch is set by the caller.
inline RecordingCase fabricated_case(const char* name, const char* made_by, const RecordedGpu& g) {
  RecordingCase c;
  c.name = name;
  c.recording.fabricated_by = std::string("tests/support/gpu_rule_cases.h: ") + made_by;
  c.recording.gpu = g;
  return c;
}

inline RecordingCase run_case(const char* name, const char* made_by, DiagnosisInput in, const RecordedGpu& g) {
  RecordingCase c = fabricated_case(name, made_by, g);
  c.recording.run = in;
  c.produced = produced_by_run(in, g);
  return c;
}

inline RecordingCase watch_case(const char* name, const char* made_by, const WatchDiagnosisInput& in,
                                RecordedGpu g) {
  g.steps.clear();  // watch has no step windows
  RecordingCase c = fabricated_case(name, made_by, g);
  c.recording.watch = in;
  c.produced = produced_by_watch(in, g);
  return c;
}

// input_copy: the copy stream carries one batch at a time, 11 ms of 64 MB each, while 8 workers
// collate theirs side by side in 1.6 ms a batch; the loop waits for the copies.
inline RecordingCase input_copy_case() {
  const RecordedGpu g = fabricated_run_gpu(2, 100, 15 * kCaseMs, [](GpuActivity& a, std::int64_t t, std::uint32_t& corr) {
    a.runtime.push_back({"cudaMemcpyAsync", t, t + 20 * kCaseUs, 2, corr});
    a.memcpys.push_back({MemcpyKind::h2d, MemoryKind::pinned, 64'000'000, t, t + 11 * kCaseMs, 0, 9, corr++, MemoryKind::device});
    launch(a, "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32", t + 11 * kCaseMs, t + 11 * kCaseMs + 20 * kCaseUs,
           t + 14 * kCaseMs, corr);
  });
  DiagnosisInput in = scenario(1.5, 100, 0.0, 0.0, 0.011, 0.004, 8, 16, true);
  in.stages[static_cast<std::size_t>(Stage::collate)] = {"collate", 100, 1.3, 13.0, 13.0, 14.0, 0, 8};
  in.stages[static_cast<std::size_t>(Stage::h2d)] = {"h2d", 100, 1.1, 11.0, 11.0, 12.0, 0, 1};
  in.pin_memory = true;
  return run_case("fabricated-input-copy", "input_copy_case()", in, g);
}

// A DDP rank: each 100 ms step runs 40 ms of its own kernels, then the all-reduce's NCCL kernel
// alone for 55 ms: it waits there for a slower rank.
inline void ddp_waiting_step(GpuActivity& a, std::int64_t t, std::uint32_t& corr) {
  launch(a, "sm90_xmma_gemm_bf16bf16_bf16f32", t, t + 20 * kCaseUs, t + 40 * kCaseMs, corr);
  launch(a, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", t + 50 * kCaseUs, t + 40 * kCaseMs, t + 95 * kCaseMs, corr, 0, 9);
}

inline RecordingCase collective_wait_run_case() {
  const RecordedGpu g = fabricated_run_gpu(1, 30, 100 * kCaseMs, ddp_waiting_step);
  return run_case("fabricated-ddp-rank-waiting", "collective_wait_run_case()",
                  scenario(3.0, 30, 0.0, 0.002, 0.0005, 0.0995, 2, 8, true), g);
}

inline RecordingCase collective_wait_watch_case() {
  return watch_case("fabricated-watch-ddp-rank-waiting", "collective_wait_watch_case()",
                    watched_trainer(0.5, 0, 0, 0.2), fabricated_run_gpu(0, 40, 100 * kCaseMs, ddp_waiting_step));
}

// A model split over two GPUs (model parallel, no pipelining): 45 ms on cuda:0, then 45 ms on
// cuda:1, in a 95 ms step; together busy 95 %, each 47 %.
inline RecordingCase devices_take_turns_case() {
  const RecordedGpu g = fabricated_run_gpu(1, 30, 95 * kCaseMs, [](GpuActivity& a, std::int64_t t, std::uint32_t& corr) {
    launch(a, "sm90_xmma_gemm_f16f16_f16f32", t, t + 20 * kCaseUs, t + 45 * kCaseMs, corr, 0);
    a.runtime.push_back({"cudaMemcpyAsync", t + 30 * kCaseUs, t + 40 * kCaseUs, 1, corr});
    a.memcpys.push_back({MemcpyKind::d2d, MemoryKind::device, 4'000'000, t + 45 * kCaseMs, t + 45 * kCaseMs + 100 * kCaseUs, 1, 7, corr++,
                         MemoryKind::device});
    launch(a, "sm90_xmma_gemm_f16f16_f16f32", t + 50 * kCaseUs, t + 45 * kCaseMs + 100 * kCaseUs, t + 90 * kCaseMs, corr, 1);
  });
  return run_case("fabricated-model-split-two-gpus", "devices_take_turns_case()",
                  scenario(2.85, 30, 0.0, 0.002, 0.0003, 0.0945, 2, 8, true), g);
}

// A step captured in a CUDA graph: one cudaGraphLaunch of 8 us replays 40 kernels of 5 us each,
// 25 us apart; the GPU is busy 20 % of the 1 ms step, the host elsewhere (Python, the optimizer).
inline void graphed_step(GpuActivity& a, std::int64_t t, std::uint32_t& corr) {
  a.runtime.push_back({"cudaGraphLaunch", t, t + 8 * kCaseUs, 1, corr});
  for (int k = 0; k < 40; ++k)
    a.kernels.push_back({"triton_poi_fused_add_mul_0", t + 20 * kCaseUs + k * 24 * kCaseUs,
                         t + 25 * kCaseUs + k * 24 * kCaseUs, 0, 7, corr, 1});
  ++corr;
}

inline RecordingCase graphed_run_case() {
  const RecordedGpu g = fabricated_run_gpu(2, 60, 1 * kCaseMs, graphed_step);
  DiagnosisInput in = scenario(0.063, 60, 0.0, 0.0002, 0.00001, 0.00095, 2, 8, true);
  in.model_parameters = 25'000'000;
  in.pin_memory = true;
  return run_case("fabricated-graphed-step", "graphed_run_case()", in, g);
}

// The training thread hands each 12 MB batch over from pageable memory (11.4 ms, 73 % of the
// run), but the GPU works 15 ms of every 15.6 ms batch: the copy overlaps the GPU's work.
inline RecordingCase copy_beside_busy_gpu_case() {
  const RecordedGpu g = fabricated_run_gpu(1, 60, 15'600 * kCaseUs, [](GpuActivity& a, std::int64_t t, std::uint32_t& corr) {
    launch(a, "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize256x128x32", t, t + 20 * kCaseUs, t + 15 * kCaseMs, corr);
    a.runtime.push_back({"cudaMemcpyAsync", t + 4'100 * kCaseUs, t + 15'500 * kCaseUs, 1, corr});
    a.memcpys.push_back({MemcpyKind::h2d, MemoryKind::pageable, 12'000'000, t + 4'200 * kCaseUs, t + 15'500 * kCaseUs, 0, 9, corr++,
                         MemoryKind::device});
  }, 4'100 * kCaseUs);
  DiagnosisInput in = scenario(0.936, 60, 0.0, 0.0, 0.0001, 0.0041, 8, 16, true);
  in.h2d_submit_s = 60 * 0.0114;
  return run_case("fabricated-copy-beside-busy-gpu", "copy_beside_busy_gpu_case()", in, g);
}

// torch's `.to(device)` without non_blocking: each 10 ms step copies its 1 MB batch from pageable
// memory and syncs the stream on the same thread at once, then runs 7 ms of kernels.
inline RecordingCase blocking_input_copy_case() {
  const RecordedGpu g = fabricated_run_gpu(1, 60, 10 * kCaseMs, [](GpuActivity& a, std::int64_t t, std::uint32_t& corr) {
    a.runtime.push_back({"cudaMemcpyAsync", t, t + 300 * kCaseUs, 1, corr});
    a.memcpys.push_back({MemcpyKind::h2d, MemoryKind::pageable, 1'000'000, t + 100 * kCaseUs, t + 400 * kCaseUs, 0, 7, corr++,
                         MemoryKind::device});
    a.runtime.push_back({"cudaStreamSynchronize", t + 310 * kCaseUs, t + 1'400 * kCaseUs, 1, corr++});
    launch(a, "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32", t + 1'500 * kCaseUs, t + 1'520 * kCaseUs,
           t + 8'500 * kCaseUs, corr);
  });
  return run_case("fabricated-blocking-input-copy", "blocking_input_copy_case()",
                  scenario(0.6, 60, 0.0, 0.002, 0.0001, 0.0099, 2, 8, true), g);
}

// No CUDA trace (the injection could not load), but NVML saw the training process on the SMs
// 92 % of the time.
inline RecordingCase nvml_only_watch_case() {
  RecordingCase c;
  c.name = "fabricated-watch-nvml-gpu-bound";
  c.recording.fabricated_by = "tests/support/gpu_rule_cases.h: nvml_only_watch_case()";
  WatchDiagnosisInput in = watched_trainer(0.4, 2, 0.3, 0.2);
  in.tree.trainer_gpu_sm_util = 0.92;
  in.tree.processes.front().gpu_sm_util = 0.92;
  in.tree.gpu_memory_peak_bytes = 30ull << 30;
  c.recording.watch = in;
  c.recording.gpu_trace_unavailable =
      "CUPTI: cuptiSubscribe: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (another CUPTI client holds CUPTI)";
  c.produced = {diagnose_watched(in), std::nullopt};
  return c;
}

// A watched program copying its batches from pageable memory: 160 ms of each 200 ms step.
inline RecordingCase pageable_copies_watch_case() {
  return watch_case("fabricated-watch-pageable-copies", "pageable_copies_watch_case()",
                    watched_trainer(0.95, 0, 0, 0.2), fabricated_run_gpu(0, 25, 200 * kCaseMs, copy_bound_step));
}

// A watched program whose GPU is busy 95 % of each 10 ms step.
inline RecordingCase gpu_bound_watch_case() {
  const RecordedGpu g = fabricated_run_gpu(0, 300, 10 * kCaseMs, [](GpuActivity& a, std::int64_t t, std::uint32_t& corr) {
    launch(a, "sm90_xmma_gemm_bf16bf16_bf16f32", t, t + 20 * kCaseUs, t + 9'500 * kCaseUs, corr);
  });
  return watch_case("fabricated-watch-gpu-bound", "gpu_bound_watch_case()", watched_trainer(0.35, 4, 0.3, 0.3), g);
}

// torch.compile's code on a pinned training thread: each 1 ms step launches 10 Triton kernels of
// 10 us through the driver (cuLaunchKernel, 5 us each), the GPU busy 10 %.
inline RecordingCase compiled_pinned_watch_case() {
  const RecordedGpu g = fabricated_run_gpu(0, 300, 1 * kCaseMs, [](GpuActivity& a, std::int64_t t, std::uint32_t& corr) {
    for (int k = 0; k < 10; ++k) {
      const std::int64_t at = t + k * 90 * kCaseUs;
      RuntimeApiRecord call{"cuLaunchKernel", at, at + 5 * kCaseUs, 1, corr, ApiDomain::driver};
      a.runtime.push_back(call);
      a.kernels.push_back({"triton_per_fused_native_layer_norm_0", at + 10 * kCaseUs, at + 20 * kCaseUs, 0, 7, corr++});
    }
  });
  return watch_case("fabricated-watch-compiled-pinned", "compiled_pinned_watch_case()",
                    watched_trainer(0.97, 0, 0, 0.2), g);
}

// Every fabricated recording: the first ones (gpu_recording_cases.h) and one per GPU rule above.
inline std::vector<RecordingCase> all_fabricated_recording_cases() {
  std::vector<RecordingCase> out = fabricated_recording_cases();
  for (RecordingCase c : {input_copy_case(), collective_wait_run_case(), collective_wait_watch_case(),
                          devices_take_turns_case(), graphed_run_case(), copy_beside_busy_gpu_case(),
                          blocking_input_copy_case(), nvml_only_watch_case(), pageable_copies_watch_case(),
                          gpu_bound_watch_case(), compiled_pinned_watch_case()})
    out.push_back(std::move(c));
  return out;
}

}  // namespace feedscope::testing
