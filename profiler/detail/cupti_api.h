#pragma once
// CUPTI, loaded at run time with dlopen as sampler/nvml_source.cc loads NVML: a CUDA build starts
// on a machine that has the CUDA runtime but no CUPTI, and traces nothing there. CUPTI's headers
// still give the types and signatures. For the .cc files of a CUDA build (FEEDSCOPE_WITH_CUDA)
// only: it includes <cupti.h>.
#include <cupti.h>

#include <cstdint>
#include <string>
#include <vector>

namespace feedscope::detail {

// Every CUPTI entry point feedscope calls, under CUPTI's own names and types.
struct CuptiApi {
  decltype(&::cuptiGetVersion) cuptiGetVersion = nullptr;
  decltype(&::cuptiGetResultString) cuptiGetResultString = nullptr;
  decltype(&::cuptiGetCallbackName) cuptiGetCallbackName = nullptr;
  decltype(&::cuptiGetTimestamp) cuptiGetTimestamp = nullptr;
  decltype(&::cuptiActivityRegisterCallbacks) cuptiActivityRegisterCallbacks = nullptr;
  decltype(&::cuptiActivityEnable) cuptiActivityEnable = nullptr;
  decltype(&::cuptiActivityEnableAndDump) cuptiActivityEnableAndDump = nullptr;
  decltype(&::cuptiActivityDisable) cuptiActivityDisable = nullptr;
  decltype(&::cuptiActivityFlushAll) cuptiActivityFlushAll = nullptr;
  decltype(&::cuptiActivityGetNextRecord) cuptiActivityGetNextRecord = nullptr;
  decltype(&::cuptiActivityGetNumDroppedRecords) cuptiActivityGetNumDroppedRecords = nullptr;
  // Optional: null where the library lacks them, and feedscope does without (the clock offset; no
  // check for another subscriber).
  decltype(&::cuptiActivityRegisterTimestampCallback) cuptiActivityRegisterTimestampCallback =
      nullptr;
  decltype(&::cuptiSubscribe) cuptiSubscribe = nullptr;
  decltype(&::cuptiUnsubscribe) cuptiUnsubscribe = nullptr;
  // Optional too: without the per-call switches the whole RUNTIME kind is traced and the driver's
  // launches not at all; without the last, every event and stream query leaves a record.
  decltype(&::cuptiActivityEnableRuntimeApi) cuptiActivityEnableRuntimeApi = nullptr;
  decltype(&::cuptiActivityEnableDriverApi) cuptiActivityEnableDriverApi = nullptr;
  decltype(&::cuptiActivityEnableAllSyncRecords) cuptiActivityEnableAllSyncRecords = nullptr;
};

// A loaded CUPTI, or why there is none.
struct CuptiLibrary {
  bool loaded = false;
  CuptiApi api;         // every pointer but the optional ones set when loaded
  std::string name;     // the name dlopen loaded it by (a path when it was loaded already)
  std::string path;     // the file the dynamic loader took for it (dladdr); else `name`
  std::uint32_t version = 0;  // cuptiGetVersion's, xxyyzz from CUDA 13 on
  std::string reason;   // when not loaded, per name tried: "libcupti.so.13 not found: <dlerror>"
};

// The names dlopen tries, in order: the soname of the CUPTI whose headers feedscope was built
// with (libcupti.so.13), the unversioned libcupti.so, and the toolkit's own copy found at
// configure time, which the dynamic loader may not search (extras/CUPTI/lib64).
std::vector<std::string> cupti_library_names();

// The paths of the shared objects loaded in this process now (dl_iterate_phdr), in load order.
std::vector<std::string> loaded_object_paths();

// What load_cupti tries: a CUPTI the process has loaded already (an object whose file name starts
// with "libcupti.so" among `loaded`, e.g. the one a CUDA torch brought in from its own pip
// package), and then nothing else, since two CUPTIs in one process would both hook the same
// driver; only when none is loaded, `names`. dlopen of a loaded object's path opens that object
// again, no second copy.
std::vector<std::string> cupti_candidates(const std::vector<std::string>& loaded,
                                          const std::vector<std::string>& names);

// Loads the first of `names` that dlopen opens, has every entry point of CuptiApi and is the
// CUPTI major version of the headers (its records have their layouts). A loaded library stays
// loaded: CUPTI may call back until the process exits.
CuptiLibrary load_cupti(const std::vector<std::string>& names);

// The process's CUPTI: cupti_candidates(loaded_object_paths(), cupti_library_names()) on first
// use. Thread-safe.
const CuptiLibrary& cupti();

}  // namespace feedscope::detail
