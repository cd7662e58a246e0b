#include "api/handed_loader.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "exporters/session_access.h"
#include "pinned_memory/errors.h"
#include "tests/pinned_memory/fake_cuda.h"

namespace feedscope {
namespace {

using feedscope::testing::FakeCuda;

// Deletes both tensors of a batch, as torch does when they die.
struct Tensors {
  HandedBatch batch;
  ~Tensors() { reset(); }
  void reset() {
    dlpack_delete(std::exchange(batch.images, nullptr));
    dlpack_delete(std::exchange(batch.labels, nullptr));
  }
};

HandedLoaderOptions options(const nlohmann::json& j, detail::CudaOps* cuda = nullptr) {
  HandedLoaderOptions o = parse_loader_options(j.dump());
  o.cuda = cuda;
  return o;
}

const nlohmann::json kSynthetic = {{"dataset", "synthetic:3x4x4"}, {"synthetic_samples", 40},
                                   {"batch_size", 4}, {"shuffle", false}};

nlohmann::json with(nlohmann::json j, const nlohmann::json& more) {
  j.update(more);
  return j;
}

std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(HandedLoaderOptionsTest, RunsKeysWithRunsMessagesUnderThePythonNames) {
  EXPECT_EQ(parse_loader_options(R"({"dataset": "images:/d", "pipeline": "eval",
                                     "shuffle": true, "max_held_batches": 3})")
                .config.image_pipeline,
            "eval");
  const std::string pipeline =
      message_of([] { parse_loader_options(R"({"dataset": "images:/d", "pipeline": "x"})"); });
  EXPECT_EQ(pipeline.rfind("pipeline: 'x' (from feedscope.DataLoader)", 0), 0u) << pipeline;
  EXPECT_NE(pipeline.find("allowed: train | eval"), std::string::npos) << pipeline;
  const std::string unknown =
      message_of([] { parse_loader_options(R"({"dataset": "images:/d", "num_worker": 2})"); });
  EXPECT_NE(unknown.find("unknown option 'num_worker'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("num_workers"), std::string::npos) << unknown;
  EXPECT_NE(message_of([] { parse_loader_options(R"({"batch_size": 2})"); }).find("dataset: missing"),
            std::string::npos);
  EXPECT_THROW(parse_loader_options(R"({"dataset": "images:/d", "max_held_batches": -1})"),
               ConfigError);
  EXPECT_THROW(parse_loader_options(R"({"dataset": "images:/d", "seed": [1]})"), ConfigError);
  EXPECT_THROW(parse_loader_options(R"({"dataset": "images:/d", "rank": 1, "world_size": 1})"),
               ConfigError);
  EXPECT_FALSE(parse_loader_options(R"({"dataset": "images:/d", "pin_memory": null})").pin_memory);
}

TEST(HandedLoaderTest, AMissingGpuIsADeviceErrorNamingTheKey) {
  FakeCuda none(0);
  const std::string why = message_of([&] {
    HandedLoader loader(options({{"dataset", "synthetic:3x4x4"}, {"device", "cuda"}}, &none));
  });
  EXPECT_EQ(why.rfind("device: 'cuda' (from feedscope.DataLoader) needs a GPU", 0), 0u) << why;
  FakeCuda one(1);
  EXPECT_NE(message_of([&] {
              HandedLoader loader(options({{"dataset", "synthetic:3x4x4"}, {"device", "cuda:3"}}, &one));
            }).find("allowed: cpu, cuda:0 to cuda:0"),
            std::string::npos);
  HandedLoader auto_loader(options({{"dataset", "synthetic:3x4x4"}, {"device", "auto"}}, &none));
  EXPECT_EQ(auto_loader.describe()["device"], "cpu");
}

TEST(HandedLoaderTest, HostBatchesViewTheirSlabAndGoBackWhenTheImagesDie) {
  HandedLoader loader(options(kSynthetic));
  Tensors t;
  ASSERT_TRUE(loader.next(nullptr, t.batch));
  const auto& images = t.batch.images->dl_tensor;
  EXPECT_EQ(images.device.device_type, dlpack::kDLCPU);
  ASSERT_EQ(images.ndim, 4);
  EXPECT_EQ(std::vector<std::int64_t>(images.shape, images.shape + 4),
            (std::vector<std::int64_t>{4, 3, 4, 4}));
  EXPECT_EQ(std::vector<std::int64_t>(images.strides, images.strides + 4),
            (std::vector<std::int64_t>{48, 16, 4, 1}));
  EXPECT_EQ(images.dtype.code, dlpack::kDLFloat);
  EXPECT_EQ(t.batch.labels->dl_tensor.dtype.bits, 64);
  t.reset();
  int batches = 1;
  for (Tensors u; loader.next(nullptr, u.batch); u.reset()) ++batches;
  EXPECT_EQ(batches, 10);
  EXPECT_EQ(loader.slabs(), loader.describe()["slabs"].get<int>()) << "nothing held: no growth";
}

// --- On the simulated device ---------------------------------------------------------------------

struct OnFakeGpu {
  explicit OnFakeGpu(int max_held = 0)
      : cuda(1),
        host(options(kSynthetic)),
        // No workers: each batch loads inside next(), so which copy is queued when is the
        // test's to say (a worker's batch would be copied ahead whenever it is collated).
        gpu(options(with(kSynthetic, {{"device", "cuda:0"}, {"pin_memory", false},
                                      {"num_workers", 0}, {"max_held_batches", max_held}}),
                    &cuda)) {}
  FakeCuda cuda;
  HandedLoader host;
  HandedLoader gpu;
};

std::vector<std::byte> host_bytes(const HandedBatch& b, std::size_t bytes) {
  const auto* p = static_cast<const std::byte*>(b.images->dl_tensor.data);
  return {p, p + bytes};
}

// What the host saw when, polling before a copy into buffer 0, it let the step on `reader` (held)
// end at its third poll: how many copies had run, and buffer 0's first 192 bytes.
struct StepEndSeen {
  std::size_t copies = 0;
  std::vector<std::byte> buffer0;
};
using StepEnd = std::shared_ptr<StepEndSeen>;
StepEnd end_step_at_third_poll(FakeCuda& cuda, void* reader, const std::byte* buffer0) {
  auto seen = std::make_shared<StepEndSeen>();
  cuda.on_idle = [&cuda, reader, buffer0, seen](int attempt) {
    if (attempt != 3 || !seen->buffer0.empty()) return;
    seen->copies = cuda.copies().size();
    seen->buffer0.assign(buffer0, buffer0 + 192);
    cuda.hold(reader, false);
  };
  return seen;
}

TEST(HandedLoaderTest, OnAGpuTheBatchIsCopiedOnItsStreamAndOrderedBeforeTheLoopsStream) {
  OnFakeGpu f;
  void* loop_stream = f.cuda.create_stream();
  f.cuda.clear_calls();
  Tensors on_gpu, on_host;
  ASSERT_TRUE(f.gpu.next(loop_stream, on_gpu.batch));
  ASSERT_TRUE(f.host.next(nullptr, on_host.batch));
  const auto& images = on_gpu.batch.images->dl_tensor;
  EXPECT_EQ(images.device.device_type, dlpack::kDLCUDA);
  EXPECT_EQ(images.device.device_id, 0);
  bool waited = false;
  for (const FakeCuda::Call& call : f.cuda.calls()) waited |= call.name == "cudaStreamWaitEvent";
  EXPECT_TRUE(waited) << "the loop's stream waits for the copy on an event";
  EXPECT_EQ(f.cuda.queued(loop_stream), 1u) << "one wait queued on the loop's stream, no sync";
  f.cuda.run_all();
  const std::size_t bytes = 4 * 3 * 4 * 4 * sizeof(float);
  EXPECT_EQ(host_bytes(on_gpu.batch, bytes), host_bytes(on_host.batch, bytes));
  const auto* labels = static_cast<const std::int64_t*>(on_gpu.batch.labels->dl_tensor.data);
  EXPECT_EQ(std::vector<std::int64_t>(labels, labels + 4),
            std::vector<std::int64_t>(static_cast<const std::int64_t*>(on_host.batch.labels->dl_tensor.data),
                                      static_cast<const std::int64_t*>(on_host.batch.labels->dl_tensor.data) + 4));
  on_gpu.reset();
  f.cuda.destroy_stream(loop_stream);
}

TEST(HandedLoaderTest, ADeviceBufferIsReusedOnlyAfterTheLoopsStreamIsDoneWithIt) {
  OnFakeGpu f;  // three device buffers, none extra; pageable slabs
  void* loop_stream = f.cuda.create_stream();
  f.cuda.hold(loop_stream, true);  // the step reading batch 0 takes long
  Tensors b0;
  ASSERT_TRUE(f.gpu.next(loop_stream, b0.batch));  // batch 0 in buffer 0
  const auto* buffer0 = static_cast<const std::byte*>(b0.batch.images->dl_tensor.data);
  f.cuda.run_all();
  const std::vector<std::byte> batch0(buffer0, buffer0 + 192);
  b0.reset();  // released after the loop stream's work queued so far
  Tensors b1, b2;
  ASSERT_TRUE(f.gpu.next(loop_stream, b1.batch));  // buffer 1
  b1.reset();
  ASSERT_TRUE(f.gpu.next(loop_stream, b2.batch));  // buffer 2
  b2.reset();
  // Batch 3 goes into buffer 0. From pageable memory the host waits for its reader, as CUDA's copy
  // call would; the step on batch 0 ends while it polls.
  const StepEnd step_end = end_step_at_third_poll(f.cuda, loop_stream, buffer0);
  Tensors b3;
  ASSERT_TRUE(f.gpu.next(loop_stream, b3.batch));
  EXPECT_EQ(step_end->copies, 3u) << "batch 3's copy waited for the step on batch 0";
  EXPECT_EQ(step_end->buffer0, batch0);
  EXPECT_EQ(b3.batch.images->dl_tensor.data, static_cast<const void*>(buffer0));
  f.cuda.run_all();
  EXPECT_EQ(f.cuda.copies().size(), 4u);
  EXPECT_NE(std::vector<std::byte>(buffer0, buffer0 + 192), batch0);
  b3.reset();
  f.cuda.run_all();
  f.cuda.destroy_stream(loop_stream);
}

TEST(HandedLoaderTest, ABatchTakenOnASideStreamIsOrderedBeforeItAndReleasedAfterIt) {
  // A loop whose step runs on a side stream takes its batches inside `with torch.cuda.stream(s)`:
  // torch's current stream at next() is s. The copy is ordered before s, not the default stream,
  // and the buffer goes back only after s's work, even when the default stream is idle.
  OnFakeGpu f;
  void* side = f.cuda.create_stream();
  void* legacy = f.cuda.legacy_stream(0);
  f.cuda.hold(side, true);  // the side stream's step on batch 0 takes long
  Tensors b0;
  ASSERT_TRUE(f.gpu.next(side, b0.batch));
  EXPECT_EQ(f.cuda.queued(side), 1u) << "the side stream waits for the copy";
  EXPECT_EQ(f.cuda.queued(legacy), 0u) << "the default stream is not involved";
  const auto* buffer0 = static_cast<const std::byte*>(b0.batch.images->dl_tensor.data);
  f.cuda.run_all();
  const std::vector<std::byte> batch0(buffer0, buffer0 + 192);
  b0.reset();
  EXPECT_EQ(f.cuda.queued(side), 2u) << "the release is recorded on the side stream";
  EXPECT_EQ(f.cuda.queued(legacy), 1u) << "and on the default one, where it may be read too";
  for (int i = 1; i < 3; ++i) {  // batches on the default stream, into buffers 1 and 2
    Tensors b;
    ASSERT_TRUE(f.gpu.next(nullptr, b.batch));
    f.cuda.run_all();
    b.reset();
    f.cuda.run_all();
  }
  const StepEnd step_end = end_step_at_third_poll(f.cuda, side, buffer0);
  Tensors b3;
  ASSERT_TRUE(f.gpu.next(nullptr, b3.batch));  // buffer 0: after the side stream's step
  EXPECT_EQ(step_end->copies, 3u);
  EXPECT_EQ(step_end->buffer0, batch0) << "not overwritten while the side stream read it";
  f.cuda.run_all();
  EXPECT_EQ(f.cuda.copies().size(), 4u);
  b3.reset();
  f.cuda.run_all();
  f.cuda.destroy_stream(side);
}

// The side-stream prefetcher: `with torch.cuda.stream(side): x = next(it)`, then
// torch.cuda.current_stream().wait_stream(side) and x read on the main (default) stream. The
// buffer must not be overwritten while the main stream still reads it, though the side stream,
// where the batch was taken, is long done with it.
TEST(HandedLoaderTest, ABatchTakenOnASideStreamAndReadOnTheDefaultOneIsReusedAfterBoth) {
  OnFakeGpu f;  // three device buffers; pageable slabs: the host waits before a copy call
  void* side = f.cuda.create_stream();
  void* main_stream = f.cuda.legacy_stream(0);
  void* side_done = f.cuda.create_event(false);
  const auto take_on_side_read_on_main = [&](Tensors& t) {
    ASSERT_TRUE(f.gpu.next(side, t.batch));
    f.cuda.record(side_done, side);  // main.wait_stream(side)
    f.cuda.stream_wait(nullptr, side_done);
  };
  f.cuda.hold(main_stream, true);  // the main stream's step on batch 0 takes long
  Tensors b0;
  take_on_side_read_on_main(b0);
  const auto* buffer0 = static_cast<const std::byte*>(b0.batch.images->dl_tensor.data);
  f.cuda.run_all();
  const std::vector<std::byte> batch0(buffer0, buffer0 + 192);
  b0.reset();  // the loop moved on; the main stream's reads of batch 0 are still queued
  for (int i = 1; i < 3; ++i) {  // buffers 1 and 2
    Tensors b;
    take_on_side_read_on_main(b);
    f.cuda.run_all();
    b.reset();
    f.cuda.run_all();
  }
  EXPECT_EQ(f.cuda.run_stream(side), 0) << "the side stream is done with every batch";
  const StepEnd step_end = end_step_at_third_poll(f.cuda, main_stream, buffer0);
  Tensors b3;
  ASSERT_TRUE(f.gpu.next(side, b3.batch));  // buffer 0 again
  EXPECT_EQ(b3.batch.images->dl_tensor.data, static_cast<const void*>(buffer0));
  f.cuda.run_all();
  EXPECT_EQ(step_end->copies, 3u) << "batch 3's copy waited for the main stream's step";
  EXPECT_EQ(step_end->buffer0, batch0) << "not overwritten while the main stream read it";
  EXPECT_EQ(f.cuda.copies().size(), 4u);
  b3.reset();
  f.cuda.run_all();
  f.cuda.destroy_event(side_done);
  f.cuda.destroy_stream(side);
}

TEST(HandedLoaderTest, BatchesKeptOnTheGpuGrowItsBuffersThenItSaysSoAndLosesNoBatch) {
  OnFakeGpu f(/*max_held=*/2);  // 3 buffers + 2
  std::vector<std::unique_ptr<Tensors>> kept;
  std::string error;
  try {
    for (int i = 0; i < 10; ++i) {
      kept.push_back(std::make_unique<Tensors>());
      ASSERT_TRUE(f.gpu.next(nullptr, kept.back()->batch));
      f.cuda.run_all();
    }
  } catch (const LoaderError& e) {
    error = e.what();
    kept.pop_back();
  }
  EXPECT_NE(error.find("device buffers are held"), std::string::npos) << error;
  EXPECT_EQ(f.gpu.device_buffers(), 5);
  for (std::size_t i = 0; i < kept.size(); ++i) EXPECT_EQ(kept[i]->batch.index, static_cast<std::int64_t>(i));
  const auto next_index = static_cast<std::int64_t>(kept.size());
  kept.clear();
  f.cuda.run_all();
  Tensors after;
  ASSERT_TRUE(f.gpu.next(nullptr, after.batch));
  EXPECT_EQ(after.batch.index, next_index) << "the batch fetched when the error came is not lost";
}

TEST(HandedLoaderTest, ATensorOutlivesItsLoaderAndEngine) {
  Tensors kept;
  FakeCuda cuda(1);
  {
    HandedLoader gpu(options(with(kSynthetic, {{"device", "cuda:0"}, {"pin_memory", false}}), &cuda));
    ASSERT_TRUE(gpu.next(nullptr, kept.batch));
  }
  cuda.run_all();
  kept.reset();  // the engine goes with the last tensor: its buffers and stream are freed
  EXPECT_EQ(cuda.live_streams(), 0);
  EXPECT_EQ(cuda.live_allocations(), 0);
}

// --- Spans into a Session ------------------------------------------------------------------------

// A session that writes its report into `dir` and nothing else: no console, sampler or trace.
Session::Options quiet_session(const std::filesystem::path& dir) {
  Session::Options so;
  so.report_dir = dir.string();
  so.print = false;
  so.sample_hz = 0;
  so.trace_gpu = false;
  return so;
}

TEST(HandedLoaderTest, AnAttachedLoadersWorkerSpansJoinTheSessionsReport) {
  const auto dir = std::filesystem::temp_directory_path() / "feedscope_handed_loader_test";
  Session session(quiet_session(dir));
  auto sink = std::make_shared<SpanSink>(&session);
  HandedLoader loader(options(with(kSynthetic, {{"num_workers", 2}})));
  loader.attach(sink);
  for (auto& batch : session.wrap(std::vector<int>(9))) {
    (void)batch;
    Tensors t;
    ASSERT_TRUE(loader.next(nullptr, t.batch));
  }
  const Report& report = SessionAccess::finish(session);
  bool collated = false;
  for (const StageStats& s : report.stages) collated |= s.name == "collate" && s.busy_s > 0;
  EXPECT_TRUE(collated) << "the workers' collate spans reached the session";
  sink->close();
  Tensors after;
  EXPECT_TRUE(loader.next(nullptr, after.batch)) << "a closed sink: the loader goes on";
  std::filesystem::remove_all(dir);
}

TEST(HandedLoaderTest, AnAutoLoaderTellsWhereItRunsAndTheSessionsReportHasItsAutotune) {
  HandedLoader fixed(options(with(kSynthetic, {{"num_workers", 1}})));
  EXPECT_TRUE(fixed.autotune().is_null()) << "fixed settings: nothing tuned";

  const auto dir = std::filesystem::temp_directory_path() / "feedscope_handed_loader_auto_test";
  Session session(quiet_session(dir));
  HandedLoader loader(options(with(kSynthetic, {{"num_workers", "auto"}, {"prefetch", "auto"},
                                            {"max_workers", 2}, {"ram_budget_mib", 64}})));
  loader.attach(std::make_shared<SpanSink>(&session));
  for (auto& batch : session.wrap(std::vector<int>(9))) {
    (void)batch;
    Tensors t;
    ASSERT_TRUE(loader.next(nullptr, t.batch));
  }
  const nlohmann::json state = loader.autotune();
  ASSERT_TRUE(state.is_object()) << state.dump();
  EXPECT_GE(state["num_workers"].get<int>(), 1);
  EXPECT_LE(state["num_workers"].get<int>(), 2);
  EXPECT_TRUE(state["lines"].is_array());
  const nlohmann::json& tuned = state["autotune"];
  EXPECT_EQ(tuned["bounds"]["max_workers"], 2);
  EXPECT_EQ(tuned["bounds"]["ram_budget_mib"], 64.0);
  EXPECT_TRUE(tuned["bounds"]["tunes_workers"].get<bool>());
  // Where it settled: where it runs, unless a trial is still being measured.
  const int final_workers = tuned["final"]["num_workers"].get<int>();
  EXPECT_GE(final_workers, 1);
  EXPECT_LE(final_workers, 2);

  const Report& report = SessionAccess::finish(session);
  ASSERT_TRUE(report.autotune.has_value()) << "the loader told the session it tunes itself";
  EXPECT_EQ(report.autotune->final.num_workers, final_workers) << "what the loader last told it";
  EXPECT_EQ(report.autotune->most.num_workers, 2);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace feedscope
