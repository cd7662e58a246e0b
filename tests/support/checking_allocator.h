#pragma once
// Wraps a HostAllocator: records every block, writes guard bytes past each one and checks them on
// free, catches double and foreign frees, can fail the Nth allocation, and reports leaks.
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>

#include "pinned_memory/host_allocator.h"

namespace feedscope::testing {

struct AllocatorLedger {
  std::mutex mutex;
  std::map<void*, std::size_t> live;
  int allocations = 0;
  int frees = 0;
  int fail_at = -1;  // 0-based index of the allocation that throws std::bad_alloc
  std::string errors;
};

class CheckingAllocator final : public HostAllocator {
 public:
  static constexpr std::size_t kGuard = 64;
  static constexpr unsigned char kPattern = 0xAB;

  CheckingAllocator(std::unique_ptr<HostAllocator> inner, std::shared_ptr<AllocatorLedger> ledger)
      : inner_(std::move(inner)), ledger_(std::move(ledger)) {}

  void* allocate(std::size_t bytes) override {
    std::lock_guard lock(ledger_->mutex);
    if (ledger_->allocations++ == ledger_->fail_at) throw std::bad_alloc();
    auto* p = static_cast<unsigned char*>(inner_->allocate(bytes + kGuard));
    std::memset(p + bytes, kPattern, kGuard);
    ledger_->live[p] = bytes;
    return p;
  }
  void deallocate(void* ptr, std::size_t bytes) noexcept override {
    std::lock_guard lock(ledger_->mutex);
    ++ledger_->frees;
    const auto it = ledger_->live.find(ptr);
    if (it == ledger_->live.end()) {
      ledger_->errors += "free of unknown or already freed block; ";
      return;
    }
    if (it->second != bytes) ledger_->errors += "free with a different size; ";
    const auto* guard = static_cast<unsigned char*>(ptr) + bytes;
    for (std::size_t i = 0; i < kGuard; ++i)
      if (guard[i] != kPattern) {
        ledger_->errors += "guard bytes overwritten; ";
        break;
      }
    ledger_->live.erase(it);
    inner_->deallocate(ptr, bytes + kGuard);
  }
  bool pinned() const noexcept override { return inner_->pinned(); }
  std::string_view name() const noexcept override { return "checking"; }

 private:
  std::unique_ptr<HostAllocator> inner_;
  std::shared_ptr<AllocatorLedger> ledger_;
};

}  // namespace feedscope::testing
