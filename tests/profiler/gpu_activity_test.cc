#include "profiler/gpu_activity.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace feedscope {
namespace {

// A record's size is fixed whatever its name: the in-process cap counts records.
TEST(GpuActivityTest, RecordsShareOneStoredCopyOfEachName) {
  const std::string long_name(300, 'k');
  const KernelRecord a{long_name, 1, 2, 0, 7, 1};
  const KernelRecord b{std::string(long_name), 3, 4, 0, 7, 2};
  EXPECT_EQ(&a.name.str(), &b.name.str());
  EXPECT_EQ(a.name, long_name);
  EXPECT_LE(sizeof(KernelRecord), 48u);
  EXPECT_LE(sizeof(RuntimeApiRecord), 48u);
  const RuntimeApiRecord r{"cudaLaunchKernel", 1, 2, 3, 4};
  EXPECT_NE(&r.name.str(), &a.name.str());
  EXPECT_EQ(r.name, "cudaLaunchKernel");
  EXPECT_EQ(KernelRecord{}.name, "");
  std::ostringstream out;
  out << r.name;
  EXPECT_EQ(out.str(), "cudaLaunchKernel");
}

TEST(GpuActivityTest, NamesInternedFromManyThreadsAreOneCopyEach) {
  std::vector<const std::string*> seen(8);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < seen.size(); ++i)
    threads.emplace_back([&seen, i] {
      for (int n = 0; n < 1000; ++n) InternedName(std::to_string(n) + " gemm");
      seen[i] = &InternedName("0 gemm").str();
    });
  for (std::thread& t : threads) t.join();
  for (const std::string* s : seen) EXPECT_EQ(s, seen[0]);
}

}  // namespace
}  // namespace feedscope
