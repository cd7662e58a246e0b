#pragma once
// Where GPU activity comes from, behind an interface as libkineto's CuptiActivityApi is: the run
// drives a real CUPTI source, tests hand the analysis fabricated records.
#include <string>

#include "profiler/gpu_activity.h"

namespace feedscope {

// One owner thread calls start/stop/collect; an implementation may gather records on threads of
// its own and says so. No call throws or crashes the traced program: failures degrade to
// unavailable_reason().
class GpuActivitySource {
 public:
  virtual ~GpuActivitySource() = default;
  // Begins recording; false (and a reason) when the source cannot trace.
  virtual bool start() = 0;
  // Stops recording and flushes what is in flight, so a following collect() sees everything.
  virtual void stop() = 0;
  // Flushes and moves out every record gathered since the previous collect().
  virtual GpuActivity collect() = 0;
  // Empty while the source works; why not otherwise ("built without CUDA", a CUPTI error).
  virtual std::string unavailable_reason() const = 0;
};

}  // namespace feedscope
