#pragma once
// What feedscope prints when it crashes (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT): the signal,
// the faulting address, and the frames, each as module+offset (what `addr2line -f -C -e MODULE
// OFFSET` turns into a function and line) with the nearest exported symbol, so that a crash seen
// on a machine nobody here can reach, a lent GPU or a user's, can be found from its log alone.
// The process then dies of the same signal, as it would have without the report.

namespace feedscope {

// Installs the handler for those signals (on an alternate stack, so a stack overflow is reported
// too). Call once, early in main().
void install_crash_report();

}  // namespace feedscope
