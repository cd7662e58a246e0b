#include "profiler/detail/cupti_api.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <cstdint>
#include <string_view>

namespace feedscope::detail {

namespace {

// From CUDA 13 on, CUPTI's API version reads xxyyzz with xx the CUDA major version.
constexpr std::uint32_t kMajor = CUPTI_API_VERSION / 10000;

std::string dlerror_text() {
  const char* why = ::dlerror();
  return why ? why : "unknown dlerror";
}

template <typename Fn>
bool bind(void* lib, Fn& fn, const char* name) {
  fn = reinterpret_cast<Fn>(::dlsym(lib, name));
  return fn != nullptr;
}

// Empty when every entry point resolved; otherwise the first one missing.
std::string bind_all(void* lib, CuptiApi& a) {
  std::string missing;
  const auto need = [&](auto& fn, const char* name) {
    if (missing.empty() && !bind(lib, fn, name)) missing = name;
  };
  need(a.cuptiGetVersion, "cuptiGetVersion");
  need(a.cuptiGetResultString, "cuptiGetResultString");
  need(a.cuptiGetCallbackName, "cuptiGetCallbackName");
  need(a.cuptiGetTimestamp, "cuptiGetTimestamp");
  need(a.cuptiActivityRegisterCallbacks, "cuptiActivityRegisterCallbacks");
  need(a.cuptiActivityEnable, "cuptiActivityEnable");
  need(a.cuptiActivityEnableAndDump, "cuptiActivityEnableAndDump");
  need(a.cuptiActivityDisable, "cuptiActivityDisable");
  need(a.cuptiActivityFlushAll, "cuptiActivityFlushAll");
  need(a.cuptiActivityGetNextRecord, "cuptiActivityGetNextRecord");
  need(a.cuptiActivityGetNumDroppedRecords, "cuptiActivityGetNumDroppedRecords");
  bind(lib, a.cuptiActivityRegisterTimestampCallback, "cuptiActivityRegisterTimestampCallback");
  bind(lib, a.cuptiSubscribe, "cuptiSubscribe");
  bind(lib, a.cuptiUnsubscribe, "cuptiUnsubscribe");
  bind(lib, a.cuptiActivityEnableRuntimeApi, "cuptiActivityEnableRuntimeApi");
  bind(lib, a.cuptiActivityEnableDriverApi, "cuptiActivityEnableDriverApi");
  bind(lib, a.cuptiActivityEnableAllSyncRecords, "cuptiActivityEnableAllSyncRecords");
  return missing;
}

// Why `name` will not do, or empty when `out` now holds it.
std::string try_load(const std::string& name, CuptiLibrary& out) {
  void* lib = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    // dlerror says which: absent, or there but not loadable (truncated, another architecture).
    const std::string why = dlerror_text();
    const bool absent = why.find("No such file or directory") != std::string::npos;
    return name + (absent ? " not found: " : " cannot be loaded: ") + why;
  }
  CuptiApi api;
  if (const std::string missing = bind_all(lib, api); !missing.empty()) {
    ::dlclose(lib);
    return name + " lacks " + missing + ": not CUPTI";
  }
  // cuptiGetVersion answers from the library alone, with no driver or device.
  std::uint32_t version = 0;
  if (api.cuptiGetVersion(&version) != CUPTI_SUCCESS) {
    ::dlclose(lib);
    return name + ": cuptiGetVersion failed";
  }
  if (version / 10000 != kMajor) {
    ::dlclose(lib);
    return name + " is CUPTI API version " + std::to_string(version) + "; feedscope reads the " +
           "records of CUDA " + std::to_string(kMajor) + "'s CUPTI (API version " +
           std::to_string(CUPTI_API_VERSION) + ")";
  }
  out.loaded = true;
  out.api = api;
  out.name = name;
  out.version = version;
  Dl_info info{};
  const bool found = ::dladdr(reinterpret_cast<void*>(api.cuptiGetVersion), &info) != 0 &&
                     info.dli_fname != nullptr && info.dli_fname[0] != '\0';
  out.path = found ? info.dli_fname : name;
  return "";
}

}  // namespace

std::vector<std::string> loaded_object_paths() {
  std::vector<std::string> paths;
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* out) {
        if (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0')  // "": the program itself
          static_cast<std::vector<std::string>*>(out)->emplace_back(info->dlpi_name);
        return 0;
      },
      &paths);
  return paths;
}

std::vector<std::string> cupti_candidates(const std::vector<std::string>& loaded,
                                          const std::vector<std::string>& names) {
  std::vector<std::string> found;
  for (const std::string& path : loaded) {
    const std::size_t slash = path.rfind('/');  // npos + 1: the whole path
    const std::string_view file = std::string_view(path).substr(slash + 1);
    if (file.starts_with("libcupti.so") &&
        std::find(found.begin(), found.end(), path) == found.end())
      found.push_back(path);
  }
  return found.empty() ? names : found;
}

std::vector<std::string> cupti_library_names() {
  std::vector<std::string> names = {"libcupti.so." + std::to_string(kMajor), "libcupti.so"};
#ifdef FEEDSCOPE_CUPTI_LIBRARY_DIR
  if (const std::string dir = FEEDSCOPE_CUPTI_LIBRARY_DIR; !dir.empty())
    names.push_back(dir + "/" + names.front());
#endif
  return names;
}

CuptiLibrary load_cupti(const std::vector<std::string>& names) {
  CuptiLibrary out;
  for (const std::string& name : names) {
    const std::string why = try_load(name, out);
    if (out.loaded) {
      out.reason.clear();
      return out;
    }
    out.reason += (out.reason.empty() ? "" : "; ") + why;
  }
  if (names.empty()) out.reason = "no CUPTI library name to try";
  return out;
}

const CuptiLibrary& cupti() {
  static const CuptiLibrary library =
      load_cupti(cupti_candidates(loaded_object_paths(), cupti_library_names()));
  return library;
}

}  // namespace feedscope::detail
