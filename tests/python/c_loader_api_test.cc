// The loader half of the C ABI (include/feedscope/feedscope_c.h), called as ctypes calls it: through
// libfeedscope.so's exported C functions.
#include <gtest/gtest.h>

#include <string>

#include "api/detail/dlpack.h"
#include <feedscope/feedscope_c.h>

namespace {

using feedscope::dlpack::DLManagedTensor;

std::string last_error() { return feedscope_last_error(); }

TEST(CLoaderApiTest, ABadOptionIsNullAndTheLastErrorNamesTheKey) {
  EXPECT_EQ(feedscope_abi_version(), FEEDSCOPE_C_ABI_VERSION);
  EXPECT_EQ(feedscope_abi_version(), 5);
  EXPECT_EQ(feedscope_loader_autotune(nullptr), nullptr);
  EXPECT_EQ(feedscope_loader_create(R"({"dataset": "synthetic:3x4x4", "prefetch": 0})"), nullptr);
  EXPECT_EQ(last_error().rfind("prefetch: '0' (from feedscope.DataLoader) is out of range", 0), 0u)
      << last_error();
  EXPECT_EQ(feedscope_loader_create("not json"), nullptr);
  EXPECT_NE(last_error().find("not a JSON object"), std::string::npos) << last_error();
  EXPECT_EQ(feedscope_loader_create(nullptr), nullptr);
  feedscope_batch batch{};
  EXPECT_EQ(feedscope_loader_next(nullptr, nullptr, &batch), -1);
  EXPECT_EQ(last_error(), "no loader (NULL)");
  feedscope_loader_destroy(nullptr);
}

TEST(CLoaderApiTest, AnEpochOfBatchesThenTheEnd) {
  feedscope_loader* loader = feedscope_loader_create(
      R"({"dataset": "synthetic:3x4x4", "synthetic_samples": 10, "batch_size": 4})");
  ASSERT_NE(loader, nullptr) << last_error();
  EXPECT_NE(std::string(feedscope_loader_describe(loader)).find(R"("batches_per_epoch":3)"),
            std::string::npos);
  EXPECT_EQ(std::string(feedscope_loader_autotune(loader)), "null") << "fixed settings";
  EXPECT_EQ(feedscope_loader_begin_epoch(loader, -1), -1);
  EXPECT_EQ(feedscope_loader_begin_epoch(loader, 0), 0);
  std::int64_t samples = 0;
  feedscope_batch batch{};
  int rc = 0;
  while ((rc = feedscope_loader_next(loader, nullptr, &batch)) == 1) {
    samples += batch.size;
    EXPECT_EQ(static_cast<DLManagedTensor*>(batch.images)->dl_tensor.shape[0], batch.size);
    feedscope_dlpack_delete(batch.images);
    feedscope_dlpack_delete(batch.labels);
  }
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(samples, 10);
  EXPECT_EQ(std::string(feedscope_loader_data_errors(loader)),
            R"({"attempted":10,"bad":0,"examples":[]})");
  feedscope_loader_destroy(loader);
}

// The capsule destructor asks the interpreter's PyCapsule functions; these stand in for them.
const char* capsule_name = "dltensor";
int fake_is_valid(void* /*capsule*/, const char* name) { return std::string(capsule_name) == name; }
void* fake_get_pointer(void* capsule, const char* /*name*/) { return capsule; }

TEST(CLoaderApiTest, TheCapsuleDestructorDeletesOnlyATensorNobodyTook) {
  feedscope_loader* loader = feedscope_loader_create(
      R"({"dataset": "synthetic:3x4x4", "synthetic_samples": 4, "batch_size": 4,
          "max_held_batches": 0})");
  ASSERT_NE(loader, nullptr) << last_error();
  EXPECT_EQ(feedscope_capsule_api(nullptr, nullptr), -1);
  ASSERT_EQ(feedscope_capsule_api(reinterpret_cast<void*>(&fake_is_valid),
                                  reinterpret_cast<void*>(&fake_get_pointer)),
            0);
  EXPECT_STREQ(feedscope_dltensor_name(), "dltensor");
  for (int epoch = 0; epoch < 8; ++epoch) {  // a leaked slab would run the pool dry
    ASSERT_EQ(feedscope_loader_begin_epoch(loader, epoch), 0);
    feedscope_batch batch{};
    ASSERT_EQ(feedscope_loader_next(loader, nullptr, &batch), 1) << last_error();
    capsule_name = "dltensor";  // not consumed: the destructor deletes it
    feedscope_capsule_destructor(batch.images);
    capsule_name = "used_dltensor";  // consumed: its consumer deletes it, the destructor must not
    feedscope_capsule_destructor(batch.labels);
    feedscope_dlpack_delete(batch.labels);
  }
  feedscope_loader_destroy(loader);
}

}  // namespace
