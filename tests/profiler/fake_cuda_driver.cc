// A stand-in for libcuda.so.1 with the one entry point the injection library calls: a driver that
// supports CUDA FAKE_CUDA_DRIVER_VERSION (1000 * major + 10 * minor, as cuDriverGetVersion says).
#ifndef FAKE_CUDA_DRIVER_VERSION
#error "FAKE_CUDA_DRIVER_VERSION must be defined"
#endif

extern "C" int cuDriverGetVersion(int* version) {
  *version = FAKE_CUDA_DRIVER_VERSION;
  return 0;
}
