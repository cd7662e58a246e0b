// A stand-in for libcupti: every entry point feedscope binds, and a cuptiGetVersion that answers
// FAKE_CUPTI_VERSION (0: fails with CUPTI_ERROR_UNKNOWN, 999). Built as modules for
// cupti_api_test.cc's refusals; nothing but cuptiGetVersion is ever called.
#include <cstdint>

#ifndef FAKE_CUPTI_VERSION
#error "FAKE_CUPTI_VERSION must be defined"
#endif

extern "C" {
int cuptiGetVersion(std::uint32_t* version) {
  if (FAKE_CUPTI_VERSION == 0) return 999;
  *version = FAKE_CUPTI_VERSION;
  return 0;
}
int cuptiGetResultString() { return 0; }
int cuptiGetCallbackName() { return 0; }
int cuptiGetTimestamp() { return 0; }
int cuptiActivityRegisterCallbacks() { return 0; }
int cuptiActivityEnable() { return 0; }
int cuptiActivityEnableAndDump() { return 0; }
int cuptiActivityDisable() { return 0; }
int cuptiActivityFlushAll() { return 0; }
int cuptiActivityGetNextRecord() { return 0; }
int cuptiActivityGetNumDroppedRecords() { return 0; }
}
