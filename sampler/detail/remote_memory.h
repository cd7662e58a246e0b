#pragma once
// Another process's memory, read while it runs (never stopped): process_vm_readv, or pread on
// /proc/PID/mem where that system call is missing or filtered (some container profiles refuse it
// and allow the file). Both need ptrace access to the process (PTRACE_MODE_ATTACH).
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace feedscope::detail {

// One thread at a time.
class RemoteMemory {
 public:
  explicit RemoteMemory(int pid) : pid_(pid) {}
  ~RemoteMemory();
  RemoteMemory(const RemoteMemory&) = delete;
  RemoteMemory& operator=(const RemoteMemory&) = delete;

  // All `size` bytes at `address`, or false with error() set (an errno: EFAULT unmapped, ESRCH
  // gone, EPERM no ptrace access).
  bool read(std::uint64_t address, void* out, std::size_t size);
  // Several ranges, in one system call where it can. Returns how many of them, from the first,
  // were read whole (the kernel stops at the first range it cannot read).
  std::size_t read_ranges(std::span<const std::uint64_t> addresses, std::span<void* const> outs,
                          std::size_t size);
  // Reads through /proc/PID/mem from now on; false (error() set) where it cannot be opened.
  bool use_mem_file();
  int error() const { return error_; }
  int pid() const { return pid_; }

 private:
  bool read_mem_file(std::uint64_t address, void* out, std::size_t size);
  // After process_vm_readv failed with `err`: whether /proc/PID/mem reads instead from now on.
  bool switch_to_mem_file(int err);

  int pid_;
  int mem_fd_ = -1;  // >= 0: reads go through /proc/PID/mem
  bool mem_file_tried_ = false;
  int error_ = 0;
};

// One sample's view of the process in 4 KiB blocks, each read once: frames that sit together in
// a thread's data stack cost one system call, and code objects are fetched in one batch. A block
// never spans two mappings (they are page-aligned), so a block is read whole or not at all.
// Blocks are copies taken at slightly different moments: the reader validates what it decodes.
class BlockCache {
 public:
  static constexpr std::size_t kBlock = 4096;
  explicit BlockCache(RemoteMemory& memory, std::size_t capacity = 64);
  void clear() { used_ = 0; }
  // Reads again, in one system call, the blocks read from since the last refresh (a stack that
  // has not moved is then read whole without another), and forgets the others.
  void refresh();
  bool read(std::uint64_t address, void* out, std::size_t size);
  template <typename T>
  bool read(std::uint64_t address, T& out) {
    return read(address, &out, sizeof out);
  }
  // Fetches the blocks that hold [address, address + size) of each address and are not held yet,
  // in as few system calls as the kernel allows. Reads that follow find them; a block that could
  // not be fetched is simply tried again (and fails) there.
  void prefetch(std::span<const std::uint64_t> addresses, std::size_t size);
  RemoteMemory& memory() { return memory_; }

 private:
  struct Block {
    std::uint64_t base = 0;
    bool used = false;  // read from since the last refresh
    std::array<std::byte, kBlock> data;
  };
  Block* find(std::uint64_t base);
  Block* take_slot();

  RemoteMemory& memory_;
  std::vector<Block> blocks_;
  std::size_t used_ = 0;
};

// Why process `pid` refused ptrace access, and which right would grant it: CAP_SYS_PTRACE, and
// Yama's ptrace_scope where the kernel has Yama (nullopt: it does not).
std::string ptrace_denied_reason(int pid, std::optional<int> ptrace_scope, bool has_cap_sys_ptrace);
// /proc/sys/kernel/yama/ptrace_scope, nullopt where the file does not exist.
std::optional<int> yama_ptrace_scope();
// Whether this process's effective capabilities hold CAP_SYS_PTRACE (/proc/self/status CapEff).
bool has_cap_sys_ptrace();

}  // namespace feedscope::detail
