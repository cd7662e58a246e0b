#include "bench/spin_kernel.h"

namespace feedscope::bench {

namespace {

__global__ void spin(const unsigned char* batch, long long cycles, unsigned int* sink) {
  const long long start = clock64();
  unsigned int state = batch != nullptr ? batch[0] + 1u : 1u;
  while (clock64() - start < cycles) state = state * 1664525u + 1013904223u;
  // A store the compiler cannot prove dead keeps the loop; it almost never happens.
  if (state == 0u) *sink = state;
}

}  // namespace

cudaError_t launch_spin(const void* batch, std::int64_t cycles, std::uint32_t* sink,
                        cudaStream_t stream) {
  spin<<<1, 1, 0, stream>>>(static_cast<const unsigned char*>(batch),
                            static_cast<long long>(cycles), sink);
  return cudaGetLastError();
}

}  // namespace feedscope::bench
