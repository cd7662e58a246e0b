#pragma once
// The GPU activity source that runs for real: CUPTI's Activity API, as libkineto's
// CuptiActivityApi uses it. Only this header's factory is public; CUPTI stays in the .cc.
#include <memory>

#include "profiler/gpu_activity.h"
#include "profiler/gpu_activity_source.h"

namespace feedscope {

// A CUPTI activity source. CUPTI delivers records to one process-wide set of callbacks, so one
// source records at a time: a second one started meanwhile reports itself unavailable. In a build
// without CUDA the source is always unavailable ("built without CUDA"); where CUPTI cannot be
// loaded at run time, it says why ("CUPTI: libcupti.so.13 not found: ..."); where the runtime
// finds no device, start() says so without calling into CUPTI ("CUPTI: no CUDA device to
// trace: ..."); where another CUPTI client holds CUPTI's one subscription (torch.profiler,
// Nsight), start() leaves CUPTI to it and says so ("CUPTI: cuptiSubscribe: ...").
// `sampling` whole (the default) records all the while; sampled, the device's records are taken
// during its lead and then in its windows only, switched by a timer thread of the source's own,
// and the activity collect() returns carries the windows (trace_sampling.h).
std::unique_ptr<GpuActivitySource> make_cupti_source(const TraceSampling& sampling = {});

}  // namespace feedscope
