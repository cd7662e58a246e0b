#pragma once
// A step of known length for bench/h2d_bench.cc: one GPU thread spins on the SM clock for a given
// number of cycles. It reads the batch's first byte, so it is a real reader of the copy it is
// ordered after, and it moves no memory of its own, so it never competes with the copy.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace feedscope::bench {

// Queues the spin on `stream` (nullptr: the legacy default stream, the one libtorch's steps use)
// and returns the launch's error. `batch` may be null; `sink` is a device word the kernel may write.
cudaError_t launch_spin(const void* batch, std::int64_t cycles, std::uint32_t* sink,
                        cudaStream_t stream);

}  // namespace feedscope::bench
