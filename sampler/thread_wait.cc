#include "sampler/thread_wait.h"

#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <sstream>

namespace feedscope {

namespace {

// The system calls a thread reading a pipe blocks in, by architecture (asm/unistd.h's numbers;
// /proc reports the native ones).
#if defined(__aarch64__)
constexpr long kRead = 63, kReadv = 65, kRecvfrom = 207, kRecvmsg = 212;
constexpr long kPoll = -2, kPpoll = 73, kSelect = -3, kPselect6 = 72;
constexpr long kEpollWait = -4, kEpollPwait = 22, kEpollPwait2 = 441;
constexpr long kFutex = 98;
constexpr long kWait4 = 260, kWaitid = 95;
#else
constexpr long kRead = 0, kReadv = 19, kRecvfrom = 45, kRecvmsg = 47;
constexpr long kPoll = 7, kPpoll = 271, kSelect = 23, kPselect6 = 270;
constexpr long kEpollWait = 232, kEpollPwait = 281, kEpollPwait2 = 441;
constexpr long kFutex = 202;
constexpr long kWait4 = 61, kWaitid = 247;
#endif
// A poll of more descriptors than this is no queue's wait (multiprocessing polls one).
constexpr std::uint64_t kMaxPolled = 64;
constexpr std::int64_t kHolderRefreshNs = 1'000'000'000;
// A socket's peer is new with each connection (torch's workers hand each batch's shared memory over
// one): the descendants' descriptors are read again for it, at most this often.
constexpr std::int64_t kSocketRefreshNs = 20'000'000;
constexpr std::int64_t kStackReopenNs = 1'000'000'000;
// Files a look kept open and no look read for this long are closed (a thread that ended).
constexpr std::int64_t kSweepNs = 1'000'000'000;
constexpr std::int64_t kStackDropNs = 5'000'000'000;
// blocked_channels' number for a thread its syscall file says is on a core.
constexpr long kOnCore = -1000;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string task_path(int pid, int tid, const char* file) {
  return "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/" + file;
}

std::optional<std::string> read_link(const std::string& path) {
  char buf[256];
  const ssize_t n = ::readlink(path.c_str(), buf, sizeof buf - 1);
  if (n <= 0) return std::nullopt;
  return std::string(buf, static_cast<std::size_t>(n));
}

// The task's state letter from its stat line; '?' where it does not parse.
char task_state(const std::string& stat) {
  const auto parsed = parse_task_stat(stat);
  return parsed ? parsed->state : '?';
}

// The inode of the socket at the other end of unix socket `inode`, from the kernel's sock_diag
// (what `ss -x` shows as the peer); none where it is no connected unix socket or the kernel has no
// unix_diag.
std::optional<std::uint64_t> unix_peer(int netlink, std::uint64_t inode) {
  struct {
    nlmsghdr header;
    unix_diag_req request;
  } ask{};
  ask.header.nlmsg_len = sizeof ask;
  ask.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  ask.header.nlmsg_flags = NLM_F_REQUEST;
  ask.request.sdiag_family = AF_UNIX;
  ask.request.udiag_ino = static_cast<__u32>(inode);
  ask.request.udiag_show = UDIAG_SHOW_PEER;
  ask.request.udiag_cookie[0] = ask.request.udiag_cookie[1] = ~0u;  // no cookie to check
  if (::send(netlink, &ask, sizeof ask, 0) != static_cast<ssize_t>(sizeof ask)) return std::nullopt;
  alignas(nlmsghdr) char answer[1024];
  const ssize_t n = ::recv(netlink, answer, sizeof answer, 0);
  if (n < static_cast<ssize_t>(sizeof(nlmsghdr))) return std::nullopt;
  const auto* header = reinterpret_cast<const nlmsghdr*>(answer);
  if (!NLMSG_OK(header, static_cast<unsigned>(n)) || header->nlmsg_type != SOCK_DIAG_BY_FAMILY)
    return std::nullopt;
  const auto* msg = static_cast<const unix_diag_msg*>(NLMSG_DATA(header));
  int left = static_cast<int>(header->nlmsg_len - NLMSG_LENGTH(sizeof *msg));
  for (const auto* a = reinterpret_cast<const rtattr*>(msg + 1); RTA_OK(a, left); a = RTA_NEXT(a, left))
    if (a->rta_type == UNIX_DIAG_PEER && RTA_PAYLOAD(a) >= sizeof(__u32))
      return *static_cast<const __u32*>(RTA_DATA(a));
  return std::nullopt;
}

}  // namespace

void add_look(MainThreadWaits& w, MainThreadState state, bool stack_read) {
  switch (state) {
    case MainThreadState::running: ++w.running; break;
    case MainThreadState::loader_queue: ++w.loader_queue; break;
    case MainThreadState::loader_thread: ++w.loader_thread; break;
    case MainThreadState::loading: ++w.loading; break;
    case MainThreadState::other_wait: ++w.other_wait; break;
    case MainThreadState::children: ++w.children; break;
    case MainThreadState::unreadable: return;
  }
  ++w.looks;
  w.stack_looks += stack_read;
}

std::optional<BlockedCall> parse_blocked_call(const std::string& text) {
  std::istringstream in(text);
  BlockedCall call;
  if (!(in >> call.number)) return std::nullopt;
  if (call.number < 0) return call;  // blocked outside a system call: no arguments
  for (std::uint64_t& arg : call.args) {
    std::string word;
    if (!(in >> word)) return std::nullopt;
    try {
      arg = std::stoull(word, nullptr, 16);
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  return call;
}

std::optional<std::uint64_t> channel_inode(const std::string& target) {
  for (const char* prefix : {"pipe:[", "socket:["}) {
    const std::size_t n = std::strlen(prefix);
    if (target.compare(0, n, prefix) != 0 || target.back() != ']') continue;
    try {
      return std::stoull(target.substr(n, target.size() - n - 1));
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

ThreadWaitProbe::~ThreadWaitProbe() {
  if (netlink_fd_ >= 0) ::close(netlink_fd_);
}

void ThreadWaitProbe::fail(const std::string& why) {
  if (why_not_.empty()) why_not_ = why;
}

bool ThreadWaitProbe::read_memory(int pid, std::uint64_t address, void* out, std::size_t size) {
  if (!memory_ || memory_->pid() != pid) memory_.emplace(pid);
  return memory_->read(address, out, size);
}

// The descriptors a blocked call waits to read: read's one, poll's array, select's read set, an
// epoll instance's targets (its fdinfo lists them).
std::vector<int> ThreadWaitProbe::polled_fds(int pid, const BlockedCall& c) {
  const long n = c.number;
  if (n == kRead || n == kReadv || n == kRecvfrom || n == kRecvmsg)
    return {static_cast<int>(c.args[0])};
  std::vector<int> fds;
  if (n == kPoll || n == kPpoll) {
    const std::uint64_t count = c.args[1];
    if (count == 0 || count > kMaxPolled) return fds;
    struct PollFd { int fd; short events, revents; } polled[kMaxPolled];
    if (!read_memory(pid, c.args[0], polled, count * sizeof(PollFd))) return fds;
    for (std::uint64_t i = 0; i < count; ++i)
      if (polled[i].fd >= 0) fds.push_back(polled[i].fd);
  } else if (n == kSelect || n == kPselect6) {
    const std::uint64_t nfds = c.args[0];
    if (nfds == 0 || nfds > 4096 || c.args[1] == 0) return fds;
    std::vector<std::uint64_t> bits((nfds + 63) / 64);
    if (!read_memory(pid, c.args[1], bits.data(), bits.size() * 8)) return fds;
    for (std::uint64_t fd = 0; fd < nfds; ++fd)
      if (bits[fd / 64] >> (fd % 64) & 1) fds.push_back(static_cast<int>(fd));
  } else if (n == kEpollWait || n == kEpollPwait || n == kEpollPwait2) {
    const auto info = files_.read("/proc/" + std::to_string(pid) + "/fdinfo/" + std::to_string(c.args[0]));
    std::istringstream lines(info.value_or(""));
    for (std::string line; std::getline(lines, line);)
      if (line.rfind("tfd:", 0) == 0) fds.push_back(std::atoi(line.c_str() + 4));
  }
  return fds;
}

// A pipe is one inode at both ends; a unix socket's ends are two, so a socket's channel is its peer.
std::set<std::uint64_t> ThreadWaitProbe::channels_of_fds(int pid, const std::vector<int>& fds,
                                                         bool* socket) {
  std::set<std::uint64_t> out;
  const std::string dir = fs_.root() + "/proc/" + std::to_string(pid) + "/fd/";
  for (const int fd : fds) {
    const auto target = read_link(dir + std::to_string(fd));
    const auto inode = target ? channel_inode(*target) : std::nullopt;
    if (!inode) continue;
    if (target->rfind("pipe:", 0) == 0) {
      out.insert(*inode);
      continue;
    }
    if (netlink_fd_ < 0)
      netlink_fd_ = ::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (const auto peer = netlink_fd_ >= 0 ? unix_peer(netlink_fd_, *inode) : std::nullopt) {
      out.insert(*peer);
      *socket = true;
    }
  }
  return out;
}

std::optional<std::set<std::uint64_t>> ThreadWaitProbe::blocked_channels(int pid, int tid,
                                                                         long* number, bool* socket) {
  const std::string path = task_path(pid, tid, "syscall");
  const auto text = files_.read(path);
  if (!text) {
    fail(::access((fs_.root() + path).c_str(), F_OK) == 0
             ? "no right to read " + path + " (it needs ptrace access: the same user with "
               "kernel.yama.ptrace_scope 0, or CAP_SYS_PTRACE)"
             : path + " is gone (the process ended)");
    return std::nullopt;
  }
  *number = -1;
  if (text->rfind("running", 0) == 0) {
    *number = kOnCore;
    return std::set<std::uint64_t>{};
  }
  const auto call = parse_blocked_call(*text);
  if (!call) return std::set<std::uint64_t>{};
  *number = call->number;
  return channels_of_fds(pid, polled_fds(pid, *call), socket);
}

bool ThreadWaitProbe::held_by(const std::set<std::uint64_t>& inodes,
                              const std::vector<int>& descendants, bool socket) {
  if (inodes.empty()) return false;
  const std::int64_t now = now_ns();
  const std::int64_t refresh_ns = socket ? kSocketRefreshNs : kHolderRefreshNs;
  for (const int pid : descendants) {
    Holder& h = holders_[pid];
    auto holds = [&] {
      for (const std::uint64_t inode : inodes)
        if (h.inodes.count(inode)) return true;
      return false;
    };
    if (h.read_ns != 0 && holds()) return true;
    if (h.read_ns != 0 && now - h.read_ns < refresh_ns) continue;  // read lately, and not there
    h.inodes.clear();
    h.read_ns = now;
    const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
    for (const std::string& fd : fs_.list_dir(dir))
      if (const auto target = read_link(fs_.root() + dir + "/" + fd))
        if (const auto inode = channel_inode(*target)) h.inodes.insert(*inode);
    if (holds()) return true;
  }
  return false;
}

// The main thread sleeps on a lock: a thread of its own that reads a loader's pipe may be what it
// waits for (pin_memory's), where no thread of the process runs (else it waits for that one: an
// intra-op pool, the GIL).
MainThreadState ThreadWaitProbe::through_thread(int pid, const std::vector<int>& descendants) {
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  std::vector<int> others;
  for (const std::string& entry : files_.list_dir(tasks)) {
    const int tid = std::atoi(entry.c_str());
    if (tid <= 0 || tid == pid) continue;
    const auto stat = files_.read(tasks + "/" + entry + "/stat");
    if (stat && task_state(*stat) == 'R') return MainThreadState::other_wait;
    others.push_back(tid);
  }
  // The thread found last time first: a look costs one read where it still waits.
  if (const auto known = reader_thread_.find(pid); known != reader_thread_.end()) {
    const auto it = std::find(others.begin(), others.end(), known->second);
    if (it != others.end()) std::rotate(others.begin(), it, it + 1);
  }
  for (const int tid : others) {
    long number = -1;
    bool socket = false;
    const auto channels = blocked_channels(pid, tid, &number, &socket);
    if (channels && held_by(*channels, descendants, socket)) {
      reader_thread_[pid] = tid;
      return MainThreadState::loader_thread;
    }
  }
  return MainThreadState::other_wait;
}

bool ThreadWaitProbe::in_loader_code(int pid) {
  // A program just started has no interpreter yet: its reader is opened again, once a second.
  const std::int64_t now = now_ns();
  auto [slot, fresh] = stacks_.try_emplace(pid);
  StackSlot& s = slot->second;
  s.looked_ns = now;
  if (fresh || (!s.reader && now - s.opened_ns >= kStackReopenNs)) {
    s.opened_ns = now;
    std::string why;
    s.reader = PythonStackReader::open(pid, &why);
  }
  if (!s.reader) return false;
  std::string why;
  stack_read_ = s.reader->read_main_thread(stack_, &why);
  return stack_read_ && is_loading_frame(stack_);
}

// Where the main thread is: by its Python stack where it can be read (in torch.utils.data's code
// it waits for a batch, takes one in, or loads one: all of it time for data), else by the system
// call it is blocked in (another loader's queue, a program that is no CPython). The stack costs one
// read of its memory (~20 us); the call, with the descendants' descriptors to match, more.
MainThreadState ThreadWaitProbe::look(int pid, const std::vector<int>& descendants) {
  stack_read_ = false;
  if (const std::int64_t now = now_ns(); now - swept_ns_ >= kSweepNs) {
    files_.sweep();
    std::erase_if(stacks_, [now](const auto& s) { return now - s.second.looked_ns >= kStackDropNs; });
    swept_ns_ = now;
  }
  if (in_loader_code(pid)) return MainThreadState::loading;
  // A stack in torch's own waits: a lock it sleeps on there is not pin_memory's queue (a DDP rank
  // waits for its all-reduce so, while a thread of its own polls a pipe its forked workers
  // inherited: c10d's store's).
  return look_at_call(pid, descendants, !(stack_read_ && is_torch_wait_frame(stack_)));
}

MainThreadState ThreadWaitProbe::look_at_call(int pid, const std::vector<int>& descendants,
                                              bool through_threads) {
  if (pid <= 0) return MainThreadState::unreadable;
  const auto stat = files_.read(task_path(pid, pid, "stat"));
  if (!stat) {
    fail("/proc/" + std::to_string(pid) + " is gone (the process ended)");
    return MainThreadState::unreadable;
  }
  if (task_state(*stat) == 'R') return MainThreadState::running;
  long number = -1;
  bool socket = false;
  const auto channels = blocked_channels(pid, pid, &number, &socket);
  if (!channels) return MainThreadState::unreadable;
  if (number == kOnCore) return MainThreadState::running;  // it woke between the two reads
  if (held_by(*channels, descendants, socket)) return MainThreadState::loader_queue;
  if (number == kWait4 || number == kWaitid) return MainThreadState::children;
  if (number == kFutex && through_threads && !descendants.empty()) return through_thread(pid, descendants);
  return MainThreadState::other_wait;
}

}  // namespace feedscope
