#include "sampler/detail/remote_memory.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace feedscope::detail {

namespace {

constexpr int kCapSysPtrace = 19;        // linux/capability.h
constexpr std::size_t kMaxRanges = 128;  // per system call, on the stack (IOV_MAX is 1024)
// Above any user-space address (x86-64 with 5-level paging: 2^56): a pointer there is garbage.
constexpr std::uint64_t kUserSpaceEnd = 1ull << 57;

}  // namespace

RemoteMemory::~RemoteMemory() {
  if (mem_fd_ >= 0) ::close(mem_fd_);
}

bool RemoteMemory::use_mem_file() {
  if (mem_fd_ >= 0) return true;
  const std::string path = "/proc/" + std::to_string(pid_) + "/mem";
  mem_fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (mem_fd_ < 0) error_ = errno;
  return mem_fd_ >= 0;
}

bool RemoteMemory::switch_to_mem_file(int err) {
  // EPERM is also what a seccomp filter answers for the system call alone.
  if ((err != ENOSYS && err != EPERM) || mem_file_tried_) return false;
  mem_file_tried_ = true;
  const bool opened = use_mem_file();
  error_ = err;  // what a failed switch reports is the system call's refusal
  return opened;
}

bool RemoteMemory::read_mem_file(std::uint64_t address, void* out, std::size_t size) {
  auto* p = static_cast<char*>(out);
  while (size > 0) {
    const ssize_t n = ::pread(mem_fd_, p, size, static_cast<off_t>(address));
    if (n <= 0) {
      // The file answers EIO for an unmapped address, where process_vm_readv says EFAULT.
      error_ = n < 0 && errno != EIO ? errno : EFAULT;
      return false;
    }
    p += n;
    address += static_cast<std::uint64_t>(n);
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

bool RemoteMemory::read(std::uint64_t address, void* out, std::size_t size) {
  if (size == 0) return true;
  if (mem_fd_ >= 0) return read_mem_file(address, out, size);
  iovec local{out, size};
  iovec remote{reinterpret_cast<void*>(address), size};
  const ssize_t n = ::process_vm_readv(pid_, &local, 1, &remote, 1, 0);
  if (n == static_cast<ssize_t>(size)) return true;
  error_ = n < 0 ? errno : EFAULT;
  if (n < 0 && switch_to_mem_file(error_)) return read_mem_file(address, out, size);
  return false;
}

std::size_t RemoteMemory::read_ranges(std::span<const std::uint64_t> addresses,
                                      std::span<void* const> outs, std::size_t size) {
  const std::size_t count = std::min(addresses.size(), outs.size());
  std::size_t done = 0;
  while (mem_fd_ < 0 && done < count) {
    const std::size_t batch = std::min(count - done, kMaxRanges);
    std::array<iovec, kMaxRanges> local, remote;
    for (std::size_t i = 0; i < batch; ++i) {
      local[i] = {outs[done + i], size};
      remote[i] = {reinterpret_cast<void*>(addresses[done + i]), size};
    }
    const ssize_t n = ::process_vm_readv(pid_, local.data(), batch, remote.data(), batch, 0);
    if (n < 0) {
      error_ = errno;
      if (!switch_to_mem_file(error_)) return done;
      break;
    }
    const std::size_t whole = static_cast<std::size_t>(n) / size;
    done += whole;
    if (whole < batch) {
      error_ = EFAULT;
      return done;
    }
  }
  for (; done < count; ++done)
    if (!read_mem_file(addresses[done], outs[done], size)) break;
  return done;
}

BlockCache::BlockCache(RemoteMemory& memory, std::size_t capacity)
    : memory_(memory), blocks_(std::max<std::size_t>(capacity, 4)) {}

BlockCache::Block* BlockCache::find(std::uint64_t base) {
  for (std::size_t i = 0; i < used_; ++i)
    if (blocks_[i].base == base) return &blocks_[i];
  return nullptr;
}

BlockCache::Block* BlockCache::take_slot() {
  if (used_ == blocks_.size()) used_ = 0;  // full: start over; callers copy out, hold nothing
  return &blocks_[used_++];
}

bool BlockCache::read(std::uint64_t address, void* out, std::size_t size) {
  auto* dest = static_cast<std::byte*>(out);
  while (size > 0) {
    const std::uint64_t base = address & ~std::uint64_t{kBlock - 1};
    Block* block = find(base);
    if (!block) {
      Block* slot = take_slot();
      if (!memory_.read(base, slot->data.data(), kBlock)) {
        --used_;
        return false;
      }
      slot->base = base;
      block = slot;
    }
    block->used = true;
    const std::size_t at = address - base;
    const std::size_t piece = std::min(size, kBlock - at);
    std::memcpy(dest, block->data.data() + at, piece);
    dest += piece;
    address += piece;
    size -= piece;
  }
  return true;
}

void BlockCache::refresh() {
  std::array<std::uint64_t, kMaxRanges> bases;
  std::array<void*, kMaxRanges> outs;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < used_ && kept < kMaxRanges; ++i) {
    if (!blocks_[i].used) continue;
    bases[kept] = blocks_[i].base;
    blocks_[kept].base = blocks_[i].base;
    outs[kept] = blocks_[kept].data.data();
    ++kept;
  }
  for (Block& b : blocks_) b.used = false;
  used_ = kept == 0 ? 0 : memory_.read_ranges({bases.data(), kept}, {outs.data(), kept}, kBlock);
}

void BlockCache::prefetch(std::span<const std::uint64_t> addresses, std::size_t size) {
  std::array<std::uint64_t, kMaxRanges> bases;
  std::size_t wanted = 0;
  for (const std::uint64_t address : addresses) {
    if (address == 0 || address >= kUserSpaceEnd) continue;
    for (std::uint64_t b = address & ~std::uint64_t{kBlock - 1}; b < address + size; b += kBlock) {
      if (wanted == bases.size() || wanted == blocks_.size()) break;
      if (!find(b) && std::find(bases.begin(), bases.begin() + wanted, b) == bases.begin() + wanted)
        bases[wanted++] = b;
    }
  }
  if (wanted == 0) return;
  if (used_ + wanted > blocks_.size()) clear();
  std::array<void*, kMaxRanges> outs;
  for (std::size_t i = 0; i < wanted; ++i) {
    blocks_[used_ + i].base = bases[i];
    outs[i] = blocks_[used_ + i].data.data();
  }
  used_ += memory_.read_ranges({bases.data(), wanted}, {outs.data(), wanted}, kBlock);
}

std::string ptrace_denied_reason(int pid, std::optional<int> ptrace_scope,
                                 bool has_cap_sys_ptrace) {
  std::ostringstream out;
  out << "reading process " << pid << "'s memory needs ptrace access to it (PTRACE_MODE_ATTACH). ";
  if (has_cap_sys_ptrace) {
    out << "This process has CAP_SYS_PTRACE, so something else refuses it (a seccomp filter, a "
           "security module such as AppArmor or SELinux, or a process in another user namespace)";
  } else {
    out << "This process lacks CAP_SYS_PTRACE (run as root, or grant it: setcap cap_sys_ptrace+ep,"
           " docker --cap-add SYS_PTRACE)";
  }
  if (ptrace_scope) {
    out << "; /proc/sys/kernel/yama/ptrace_scope is " << *ptrace_scope;
    switch (*ptrace_scope) {
      case 0:
        out << " (a process of the same user may read it)";
        break;
      case 1:
        out << " (without CAP_SYS_PTRACE only the process's ancestors may read it)";
        break;
      case 2:
        out << " (only CAP_SYS_PTRACE allows it)";
        break;
      default:
        out << " (no process may, until reboot)";
        break;
    }
  }
  return out.str();
}

std::optional<int> yama_ptrace_scope() {
  std::ifstream in("/proc/sys/kernel/yama/ptrace_scope");
  int value = 0;
  if (!(in >> value)) return std::nullopt;
  return value;
}

bool has_cap_sys_ptrace() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("CapEff:", 0) != 0) continue;
    const unsigned long long caps = std::strtoull(line.c_str() + 7, nullptr, 16);
    return (caps >> kCapSysPtrace) & 1;
  }
  return false;
}

}  // namespace feedscope::detail
