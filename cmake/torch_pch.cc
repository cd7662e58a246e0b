// Compiles nothing itself: it gives CMake a source to build the shared <torch/torch.h>
// precompiled header from (feedscope_add_torch_pch in FeedscopeModule.cmake).
