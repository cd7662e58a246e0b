#pragma once
// Where a process's main thread waits, read from outside, so that the data stall of a program
// feedscope did not write is measured, not inferred. A PyTorch DataLoader with workers hands its
// batches to the training thread through a pipe (multiprocessing's result queue) whose writing end
// the worker processes hold; a training thread waiting for its next batch is blocked reading that
// pipe (read, poll, select, epoll), or, for each batch's tensors, reading the descriptors of their
// shared memory from a socket the worker serves (torch's file_descriptor sharing: a connection to
// the worker's resource sharer, which answers once the worker's Python thread lets it: most of the
// wait is there). With pin_memory=True a thread of its own reads the pipe and the
// training thread waits on a lock (futex) for that thread's queue instead. So one look at
// /proc/PID/task/TID/syscall (which system call, its arguments), the polled descriptors in the
// process's memory (/proc/PID/mem), and /proc/*/fd (which pipe each descriptor is, and who else
// holds it; for a unix socket, which socket is its other end, from the kernel's sock_diag)
// says whether the training thread is waiting for data at that instant; many looks give
// the share of the time it was.
//
// Reading syscall and mem needs the right to trace the process (PTRACE_MODE_ATTACH): the same user
// under Yama's ptrace_scope 0, an ancestor under scope 1, CAP_SYS_PTRACE otherwise. Nothing is
// stopped or written: the kernel answers from the blocked task's saved registers.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "sampler/detail/remote_memory.h"
#include "sampler/proc_file_cache.h"
#include "sampler/proc_fs.h"
#include "sampler/python_stack.h"
#include "sampler/utilization_sample.h"

namespace feedscope {

// What one look saw of the main thread.
enum class MainThreadState : std::uint8_t {
  running,        // on a core, or ready for one
  loader_queue,   // blocked reading a pipe one of its descendants holds (a loader worker's)
  loader_thread,  // blocked on a lock while its thread that reads such a pipe waits on it, and
                  // none of its threads runs (pin_memory's thread between the workers and it)
  loading,        // in torch.utils.data's code by its Python stack (the DataLoader loading in
                  // this thread at num_workers=0, or taking a worker's batch in): running or not
  children,       // blocked waiting for a child process to end (wait4, waitid)
  other_wait,     // blocked on anything else (a CUDA sync that sleeps, a file, a lock, a sleep)
  unreadable,     // the look failed (the process ended, no right to read it)
};

// Counts one look (MainThreadWaits is in sampler/utilization_sample.h); an unreadable one is not.
// `stack_read`: the look read the thread's Python stack.
void add_look(MainThreadWaits& waits, MainThreadState state, bool stack_read = false);

// One system call a blocked thread is in, from /proc/PID/task/TID/syscall ("202 0x7f.. ... sp pc";
// "running" for a thread on a core; "-1 sp pc" for one blocked outside a system call).
struct BlockedCall {
  long number = -1;
  std::uint64_t args[6] = {};
};
std::optional<BlockedCall> parse_blocked_call(const std::string& text);

// "pipe:[1234]" or "socket:[1234]" (the target of a /proc/PID/fd link) -> 1234.
std::optional<std::uint64_t> channel_inode(const std::string& link_target);

// Sampling thread only (it keeps caches); one per watched program.
class ThreadWaitProbe {
 public:
  explicit ThreadWaitProbe(ProcFs fs) : fs_(std::move(fs)), files_(fs_, kMaxOpenFiles) {}
  ~ThreadWaitProbe();
  ThreadWaitProbe(const ThreadWaitProbe&) = delete;
  ThreadWaitProbe& operator=(const ThreadWaitProbe&) = delete;

  // One look at process `pid`'s main thread; `descendants` are the processes whose pipes count as
  // a loader's (its loader workers). Where the look fails, why_not() says why.
  MainThreadState look(int pid, const std::vector<int>& descendants);
  // Whether the last look read the main thread's Python stack (a CPython program whose stack
  // the reader could follow, sampler/python_stack.h).
  bool stack_read() const { return stack_read_; }
  // The first reason a look failed ("no right to read /proc/12/task/12/syscall: ..."); empty if
  // none did.
  const std::string& why_not() const { return why_not_; }

 private:
  // The channel inodes (pipes, sockets) the thread `tid` of `pid` is blocked reading; empty where
  // it is blocked on none; nullopt where its syscall file cannot be read.
  // `socket`: set where a channel is a unix socket's peer (a descriptor that lives for one
  // connection, whose holder's descriptors must be read again to be found).
  std::optional<std::set<std::uint64_t>> blocked_channels(int pid, int tid, long* number, bool* socket);
  std::set<std::uint64_t> channels_of_fds(int pid, const std::vector<int>& fds, bool* socket);
  std::vector<int> polled_fds(int pid, const BlockedCall& call);
  bool read_memory(int pid, std::uint64_t address, void* out, std::size_t size);
  // Whether one of `descendants` holds one of `inodes` (its fd table is read once, and again where
  // an inode is not found, at most once a second).
  bool held_by(const std::set<std::uint64_t>& inodes, const std::vector<int>& descendants, bool socket);
  // `through_threads`: a main thread asleep on a lock may be waiting for a thread of its own that
  // reads a loader's pipe (none where its Python stack showed it elsewhere).
  MainThreadState look_at_call(int pid, const std::vector<int>& descendants, bool through_threads = true);
  MainThreadState through_thread(int pid, const std::vector<int>& descendants);
  // Whether the main thread's Python stack is in torch.utils.data's code (sets stack_read_).
  bool in_loader_code(int pid);
  void fail(const std::string& why);

  // The threads' stat and syscall files a look reads, kept open (closed a second after their last
  // read): a look at 50 Hz costs a read of each, not an open.
  static constexpr std::size_t kMaxOpenFiles = 256;
  ProcFs fs_;
  ProcFileCache files_;
  std::int64_t swept_ns_ = 0;
  std::string why_not_;
  std::optional<detail::RemoteMemory> memory_;  // of the process last looked at
  int netlink_fd_ = -1;  // NETLINK_SOCK_DIAG, for a unix socket's peer
  struct Holder {
    std::set<std::uint64_t> inodes;
    std::int64_t read_ns = 0;
  };
  std::map<int, Holder> holders_;  // by descendant pid
  // The pid's thread last seen blocked on a loader's pipe (pin_memory's): looked at first.
  std::map<int, int> reader_thread_;
  // The Python stack's reader of each pid looked at (the training process, and each rank of a
  // job, looked at in turn), opened at its first look; none where it is no CPython the reader
  // follows (tried again once a second: an interpreter starting up). Dropped 5 s after its last
  // look (a process that ended).
  struct StackSlot {
    std::int64_t opened_ns = 0;
    std::int64_t looked_ns = 0;
    std::optional<PythonStackReader> reader;
  };
  std::map<int, StackSlot> stacks_;
  PythonStack stack_;
  bool stack_read_ = false;
};

}  // namespace feedscope
