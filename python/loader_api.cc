// The loader half of include/feedscope/feedscope_c.h over api/handed_loader.h. Every entry point catches: no
// C++ exception may unwind into a C caller.
#include <unistd.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "python/detail/c_support.h"
#include <feedscope/feedscope_c.h>
#include "api/handed_loader.h"

struct feedscope_loader {
  pid_t owner = ::getpid();  // a forked child's copy has no workers: it must neither use nor join
  std::mutex mutex;          // one call at a time: ctypes releases the GIL, so threads may race
  std::unique_ptr<feedscope::HandedLoader> loader;
  std::string text;  // describe()'s and data_errors()'s JSON
};

namespace {

using feedscope::c_api::fail;
using feedscope::c_api::guarded;
namespace py = feedscope;

bool usable(feedscope_loader* l) {
  if (l == nullptr) {
    fail("no loader (NULL)");
    return false;
  }
  if (l->owner != ::getpid()) {
    fail("this feedscope.DataLoader belongs to process " + std::to_string(l->owner) +
         "; a forked child has none of its workers: make a loader in the child");
    return false;
  }
  return true;
}

// The running interpreter's PyCapsule_IsValid and PyCapsule_GetPointer (feedscope_capsule_api).
using CapsuleIsValid = int (*)(void*, const char*);
using CapsuleGetPointer = void* (*)(void*, const char*);
std::atomic<CapsuleIsValid> capsule_is_valid{nullptr};
std::atomic<CapsuleGetPointer> capsule_get_pointer{nullptr};

constexpr const char* kDlTensorName = "dltensor";

}  // namespace

extern "C" {

feedscope_loader* feedscope_loader_create(const char* options_json) {
  auto l = std::make_unique<feedscope_loader>();
  const int rc = guarded([&] {
    l->loader = std::make_unique<py::HandedLoader>(
        py::parse_loader_options(options_json != nullptr ? options_json : ""));
  });
  return rc == 0 ? l.release() : nullptr;
}

void feedscope_loader_destroy(feedscope_loader* loader) {
  if (loader == nullptr) return;
  if (loader->owner != ::getpid()) {  // a fork's copy: its workers are not here to join
    (void)loader->loader.release();
    return;
  }
  guarded([&] { delete loader; });
}

const char* feedscope_loader_describe(feedscope_loader* l) {
  if (!usable(l)) return nullptr;
  const std::lock_guard lock(l->mutex);
  const int rc = guarded([&] { l->text = l->loader->describe().dump(); });
  return rc == 0 ? l->text.c_str() : nullptr;
}

const char* feedscope_loader_data_errors(feedscope_loader* l) {
  if (!usable(l)) return nullptr;
  const std::lock_guard lock(l->mutex);
  const int rc = guarded([&] { l->text = l->loader->data_errors().dump(); });
  return rc == 0 ? l->text.c_str() : nullptr;
}

const char* feedscope_loader_sample_costs(feedscope_loader* l) {
  if (!usable(l)) return nullptr;
  const std::lock_guard lock(l->mutex);
  const int rc = guarded([&] { l->text = l->loader->sample_costs().dump(); });
  return rc == 0 ? l->text.c_str() : nullptr;
}

const char* feedscope_loader_autotune(feedscope_loader* l) {
  if (!usable(l)) return nullptr;
  const std::lock_guard lock(l->mutex);
  const int rc = guarded([&] { l->text = l->loader->autotune().dump(); });
  return rc == 0 ? l->text.c_str() : nullptr;
}

int feedscope_loader_begin_epoch(feedscope_loader* l, int64_t epoch) {
  if (!usable(l)) return -1;
  if (epoch < 0) return fail("epoch " + std::to_string(epoch) + " is negative; allowed: 0 or more");
  const std::lock_guard lock(l->mutex);
  return guarded([&] { l->loader->begin_epoch(static_cast<std::uint64_t>(epoch)); });
}

int feedscope_loader_next(feedscope_loader* l, void* stream, feedscope_batch* out) {
  if (!usable(l)) return -1;
  if (out == nullptr) return fail("feedscope_loader_next: no batch to fill (NULL)");
  const std::lock_guard lock(l->mutex);
  bool got = false;
  py::HandedBatch batch;
  const int rc = guarded([&] { got = l->loader->next(stream, batch); });
  if (rc != 0) return -1;
  *out = feedscope_batch{};
  out->slabs = l->loader->slabs();
  out->device_buffers = l->loader->device_buffers();
  if (!got) return 0;
  out->index = batch.index;
  out->epoch = static_cast<int64_t>(batch.epoch);
  out->size = batch.size;
  out->images = batch.images;
  out->labels = batch.labels;
  return 1;
}

int feedscope_loader_attach(feedscope_loader* l, feedscope_session* s) {
  if (!usable(l)) return -1;
  if (s != nullptr && s->owner != ::getpid())
    return fail("the session belongs to process " + std::to_string(s->owner));
  const std::lock_guard lock(l->mutex);
  return guarded([&] {
    if (s != nullptr && !s->sink) s->sink = std::make_shared<py::SpanSink>(s->session.get());
    l->loader->attach(s != nullptr ? s->sink : nullptr);
  });
}

void feedscope_dlpack_delete(void* tensor) {
  py::dlpack_delete(static_cast<py::dlpack::DLManagedTensor*>(tensor));
}

const char* feedscope_dltensor_name(void) { return kDlTensorName; }

int feedscope_capsule_api(void* is_valid, void* get_pointer) {
  if (is_valid == nullptr || get_pointer == nullptr)
    return fail("feedscope_capsule_api: both functions are needed");
  capsule_is_valid.store(reinterpret_cast<CapsuleIsValid>(is_valid));
  capsule_get_pointer.store(reinterpret_cast<CapsuleGetPointer>(get_pointer));
  return 0;
}

void feedscope_capsule_destructor(void* capsule) {
  const CapsuleIsValid is_valid = capsule_is_valid.load();
  const CapsuleGetPointer get_pointer = capsule_get_pointer.load();
  // A consumed capsule was renamed "used_dltensor" by its consumer, which owns the tensor now.
  if (is_valid == nullptr || get_pointer == nullptr || is_valid(capsule, kDlTensorName) == 0) return;
  py::dlpack_delete(static_cast<py::dlpack::DLManagedTensor*>(get_pointer(capsule, kDlTensorName)));
}

}  // extern "C"
