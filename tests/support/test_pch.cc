// Compiles nothing itself: it gives CMake a source to build the test suite's one precompiled
// header from (feedscope_test_pch in tests/CMakeLists.txt).
