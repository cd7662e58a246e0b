// A CUDA injection library that does nothing: CUDA loads it (CUDA_INJECTION64_PATH) and calls
// InitializeInjection, which returns at once, with no CUPTI. `feedscope watch` runs a program with
// it where FEEDSCOPE_INJECTION_LIBRARY names it, so the device check can split what tracing costs
// a program (CUPTI's records) from what the rest of watching costs it (the sampler, the loading of
// an injection library): bare, watched with this, and watched with feedscope's own, interleaved.
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) { return 1; }
