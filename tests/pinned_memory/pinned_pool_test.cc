#include "pinned_memory/pinned_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "pinned_memory/errors.h"
#include "tests/support/checking_allocator.h"

namespace feedscope {
namespace {

using testing::AllocatorLedger;
using testing::CheckingAllocator;

std::shared_ptr<PinnedPool> make_pool(std::size_t bytes, int count,
                                      std::shared_ptr<AllocatorLedger> ledger) {
  return PinnedPool::create(bytes, count,
                            std::make_unique<CheckingAllocator>(make_page_allocator(), ledger));
}

TEST(PinnedPoolTest, AllocatesEverySlabUpFrontAndFreesThemAll) {
  auto ledger = std::make_shared<AllocatorLedger>();
  {
    auto pool = make_pool(10000, 4, ledger);
    EXPECT_EQ(ledger->allocations, 4);
    EXPECT_EQ(pool->slab_bytes() % page_size(), 0u);
    EXPECT_GE(pool->slab_bytes(), 10000u);
    Slab a = pool->acquire();
    Slab b = pool->acquire();
    EXPECT_EQ(ledger->allocations, 4) << "no allocation in steady state";
    EXPECT_EQ(pool->slabs_in_use(), 2);
  }
  EXPECT_TRUE(ledger->live.empty()) << "leaked " << ledger->live.size() << " blocks";
  EXPECT_EQ(ledger->frees, 4);
  EXPECT_EQ(ledger->errors, "");
}

TEST(PinnedPoolTest, SlabsArePageAlignedAndWritableToTheirEnd) {
  auto ledger = std::make_shared<AllocatorLedger>();
  auto pool = make_pool(5000, 2, ledger);
  Slab s = pool->acquire();
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(s.data()) % page_size(), 0u);
  std::memset(s.data(), 0x5A, s.size());  // the guard bytes past it must survive
  s.reset();
  pool.reset();
  EXPECT_EQ(ledger->errors, "");
}

TEST(PinnedPoolTest, ExhaustionGivesBackpressureNotDeadlock) {
  auto pool = make_pool(4096, 2, std::make_shared<AllocatorLedger>());
  Slab a = pool->acquire();
  Slab b = pool->acquire();
  EXPECT_FALSE(pool->try_acquire()) << "an empty pool says so at once";
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    Slab c = pool->acquire();  // blocks until a holder lets go
    got = true;
  });
  a.reset();
  waiter.join();
  EXPECT_TRUE(got);
  EXPECT_EQ(pool->peak_in_use(), 2);
}

TEST(PinnedPoolTest, AbortWakesBlockedAcquirers) {
  auto pool = make_pool(4096, 1, std::make_shared<AllocatorLedger>());
  Slab held = pool->acquire();
  std::atomic<bool> threw{false};
  std::thread waiter([&] {
    try {
      pool->acquire();
    } catch (const std::runtime_error&) {
      threw = true;
    }
  });
  pool->abort();
  waiter.join();
  EXPECT_TRUE(threw);
}

TEST(PinnedPoolTest, SlabOutlivesThePoolHandleAndReturnsOnce) {
  auto ledger = std::make_shared<AllocatorLedger>();
  Slab survivor;
  {
    auto pool = make_pool(4096, 3, ledger);
    survivor = pool->acquire();
    Slab moved = pool->acquire();
    Slab target = std::move(moved);  // moved-from slab must not return it twice
    EXPECT_FALSE(moved);
    EXPECT_EQ(pool->slabs_in_use(), 2);
  }
  EXPECT_EQ(ledger->frees, 0) << "a held slab keeps the pool alive";
  survivor.reset();
  EXPECT_EQ(ledger->frees, 3);
  EXPECT_EQ(ledger->errors, "");
}

TEST(PinnedPoolTest, FailedAllocationFreesWhatWasTakenAndThrows) {
  auto ledger = std::make_shared<AllocatorLedger>();
  ledger->fail_at = 2;
  EXPECT_THROW(make_pool(4096, 4, ledger), std::bad_alloc);
  EXPECT_TRUE(ledger->live.empty());
  EXPECT_EQ(ledger->errors, "");
}

TEST(PinnedPoolTest, RejectsZeroSizeOrCount) {
  EXPECT_THROW(PinnedPool::create(0, 2, make_page_allocator()), std::invalid_argument);
  EXPECT_THROW(PinnedPool::create(4096, 0, make_page_allocator()), std::invalid_argument);
}

TEST(PinnedPoolTest, GrowsOneSlabAtATimeUpToItsBoundAndFreesEverySlab) {
  auto ledger = std::make_shared<AllocatorLedger>();
  {
    auto pool = PinnedPool::create(
        4096, 2, std::make_unique<CheckingAllocator>(make_page_allocator(), ledger), 4);
    EXPECT_EQ(pool->slab_count(), 2);
    EXPECT_EQ(pool->max_slab_count(), 4);
    EXPECT_EQ(ledger->allocations, 2) << "only the first count up front";
    std::vector<Slab> held;
    held.push_back(pool->acquire());
    held.push_back(pool->acquire());
    EXPECT_FALSE(pool->try_acquire());
    EXPECT_TRUE(pool->grow());
    EXPECT_TRUE(pool->grow());
    EXPECT_FALSE(pool->grow()) << "at its bound";
    EXPECT_EQ(pool->slab_count(), 4);
    EXPECT_EQ(pool->total_bytes(), 4 * pool->slab_bytes());
    held.push_back(pool->try_acquire());
    held.push_back(pool->try_acquire());
    std::set<std::byte*> distinct;
    for (const Slab& s : held) {
      ASSERT_TRUE(s);
      distinct.insert(s.data());
    }
    EXPECT_EQ(distinct.size(), 4u);
    EXPECT_FALSE(pool->try_acquire());
  }
  EXPECT_TRUE(ledger->live.empty()) << "leaked " << ledger->live.size() << " blocks";
  EXPECT_EQ(ledger->frees, 4);
  EXPECT_EQ(ledger->errors, "");
}

TEST(PinnedPoolTest, APoolWithoutABoundDoesNotGrow) {
  auto pool = make_pool(4096, 2, std::make_shared<AllocatorLedger>());
  EXPECT_FALSE(pool->grow());
  EXPECT_EQ(pool->slab_count(), 2);
}

TEST(PinnedPoolTest, ConcurrentAcquireReleaseKeepsEverySlabDistinct) {
  auto ledger = std::make_shared<AllocatorLedger>();
  auto pool = make_pool(4096, 4, ledger);
  std::atomic<int> collisions{0};
  std::vector<std::atomic<int>> owners(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        Slab s = pool->acquire();
        if (owners[static_cast<std::size_t>(s.id())].fetch_add(1) != 0) ++collisions;
        owners[static_cast<std::size_t>(s.id())].fetch_sub(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(collisions, 0);
  EXPECT_EQ(pool->slabs_in_use(), 0);
}

TEST(PinnedPoolGpuTest, PinnedAllocatorNeedsADevice) {
  try {
    auto allocator = make_pinned_allocator();
    auto pool = PinnedPool::create(1 << 20, 2, std::move(allocator));
    EXPECT_TRUE(pool->pinned());
  } catch (const DeviceError& e) {
    GTEST_SKIP() << "no CUDA device: " << e.what();
  }
}

}  // namespace
}  // namespace feedscope
