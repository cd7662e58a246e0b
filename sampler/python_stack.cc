#include "sampler/python_stack.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include "sampler/detail/cpython_layout.h"
#include "sampler/detail/elf_symbols.h"
#include "sampler/detail/remote_memory.h"

namespace feedscope {

namespace {

using detail::CPythonLayout;

constexpr int kOldestMinor = 11;
constexpr int kNewestMinor = 13;
constexpr std::size_t kMaxStruct = 512;           // the most of any structure one read needs
constexpr std::uint64_t kMaxText = 1 << 16;       // a longer file or function name is not one
constexpr std::uint64_t kMaxLineTable = 1 << 16;  // a longer table: the line is left unknown
constexpr std::size_t kMaxCachedCodes = 4096;
constexpr int kMaxThreads = 4096;
constexpr int kAttempts = 3;  // a stack that changed under the read is read again, twice at most

struct Mapping {
  std::uint64_t start = 0;
  std::uint64_t offset = 0;
  std::string path;
};

// The file-backed mappings of /proc/PID/maps; nullopt (errno in `err`) where it cannot be read.
std::optional<std::vector<Mapping>> read_maps(int pid, int& err) {
  const std::string path = "/proc/" + std::to_string(pid) + "/maps";
  std::FILE* file = std::fopen(path.c_str(), "re");
  if (!file) {
    err = errno;
    return std::nullopt;
  }
  std::vector<Mapping> out;
  char line[4096 + 256];
  while (std::fgets(line, sizeof line, file)) {
    Mapping m;
    std::uint64_t end = 0;
    int name_at = 0;
    if (std::sscanf(line, "%" SCNx64 "-%" SCNx64 " %*s %" SCNx64 " %*s %*s %n", &m.start, &end,
                    &m.offset, &name_at) < 3 ||
        name_at == 0 || line[name_at] != '/')
      continue;
    m.path = line + name_at;
    while (!m.path.empty() && (m.path.back() == '\n' || m.path.back() == ' ')) m.path.pop_back();
    out.push_back(std::move(m));
  }
  std::fclose(file);
  return out;
}

// "python3.11", "libpython3.12.so.1.0", "python3.13t": the version its name says, and its ABI
// flags ("t": free-threaded, "d": debug).
struct InterpreterName {
  int major = 0;
  int minor = 0;
  std::string flags;
};

std::optional<InterpreterName> parse_interpreter_name(std::string_view path) {
  std::string_view name = path.substr(path.rfind('/') + 1);
  const bool library = name.starts_with("libpython");
  name.remove_prefix(library ? 9 : name.starts_with("python") ? 6 : name.size());
  InterpreterName out;
  const char* end = name.data() + name.size();
  const auto major = std::from_chars(name.data(), end, out.major);
  if (major.ec != std::errc() || major.ptr == end || *major.ptr != '.') return std::nullopt;
  const auto minor = std::from_chars(major.ptr + 1, end, out.minor);
  if (minor.ec != std::errc()) return std::nullopt;
  const char* p = minor.ptr;
  while (p != end && *p >= 'a' && *p <= 'z') out.flags += *p++;
  const std::string_view rest(p, static_cast<std::size_t>(end - p));
  if (library ? !rest.starts_with(".so") : !rest.empty()) return std::nullopt;
  return out;
}

std::string first_line_of(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The process's PID in its own PID namespace (NSpid's last field): what its main thread's
// native_thread_id holds, whichever namespace this process is in.
int pid_in_own_namespace(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with("NSpid:")) continue;
    std::istringstream fields(line.substr(6));
    int last = pid;
    for (int v; fields >> v;) last = v;
    return last;
  }
  return pid;
}

// The symbols of a file the process maps, opened through its root (it may run in another mount
// namespace), else by the name it has here.
std::optional<detail::ElfSymbols> symbols_of_mapped(int pid, const Mapping& m,
                                                    const std::vector<std::string_view>& wanted,
                                                    std::string* why_not) {
  const std::string proc = "/proc/" + std::to_string(pid);
  std::string path = m.path;
  if (path.ends_with(" (deleted)")) path.resize(path.size() - 10);
  for (const std::string& candidate : {proc + "/root" + path, path}) {
    if (auto symbols = detail::read_elf_symbols(candidate, wanted, why_not)) return symbols;
  }
  return std::nullopt;
}

std::string hex(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
  return buf;
}

template <typename T>
T field(const std::byte* data, std::uint64_t offset) {
  T v;
  std::memcpy(&v, data + offset, sizeof v);
  return v;
}

const std::vector<std::string_view> kSymbols = {"_PyRuntime", "PyCode_Type", "PyUnicode_Type",
                                                "PyBytes_Type", "Py_Version"};

struct Interpreter {
  std::string path;
  std::uint64_t bias = 0;  // run-time address - link-time address
  detail::ElfSymbols symbols;
  std::optional<InterpreterName> name;
};

std::string maps_error(int pid, int err) {
  const std::string proc = "/proc/" + std::to_string(pid);
  if (err == ENOENT || err == ESRCH) return "no process " + std::to_string(pid);
  if (err == EACCES || err == EPERM)
    return "cannot read " + proc + "/maps: " +
           detail::ptrace_denied_reason(pid, detail::yama_ptrace_scope(),
                                        detail::has_cap_sys_ptrace());
  return "cannot read " + proc + "/maps: " + std::strerror(err);
}

std::string unsupported(const InterpreterName& name, int pid, const std::string& path) {
  return "CPython " + std::to_string(name.major) + "." + std::to_string(name.minor) + name.flags +
         " is not supported (3." + std::to_string(kOldestMinor) + " to 3." +
         std::to_string(kNewestMinor) + " are, default builds): process " + std::to_string(pid) +
         " runs " + path;
}

bool supported(const InterpreterName& name) {
  return name.major == 3 && name.minor >= kOldestMinor && name.minor <= kNewestMinor &&
         name.flags.find('t') == std::string::npos;  // "t": free-threaded, another object layout
}

// The offset-0 mappings of files named for CPython, the executable's first (a static python3.X
// holds _PyRuntime even where it also maps a libpython); without any, the executable itself
// (a CPython renamed "python"), whose Py_Version then says which it is.
std::vector<const Mapping*> candidates_of(int pid, const std::vector<Mapping>& maps) {
  char exe[4096] = {};
  const std::string link = "/proc/" + std::to_string(pid) + "/exe";
  const ssize_t n = ::readlink(link.c_str(), exe, sizeof exe - 1);
  const std::string exe_path =
      n > 0 ? std::string(exe, static_cast<std::size_t>(n)) : std::string();
  std::vector<const Mapping*> named, executable;
  for (const Mapping& m : maps) {
    if (m.offset != 0) continue;
    if (m.path == exe_path) executable.push_back(&m);
    if (parse_interpreter_name(m.path)) named.push_back(&m);
  }
  if (named.empty()) return executable;
  std::stable_partition(named.begin(), named.end(),
                        [&](const Mapping* m) { return m->path == exe_path; });
  return named;
}

std::optional<Interpreter> find_interpreter(int pid, std::string& why) {
  int err = 0;
  const auto maps = read_maps(pid, err);
  if (!maps) {
    why = maps_error(pid, err);
    return std::nullopt;
  }
  const std::vector<const Mapping*> candidates = candidates_of(pid, *maps);
  std::string elf_why;
  for (const Mapping* m : candidates) {
    auto symbols = symbols_of_mapped(pid, *m, kSymbols, &elf_why);
    if (!symbols || !symbols->values.contains("_PyRuntime")) continue;
    return Interpreter{m->path, m->start - symbols->file_start_vaddr, std::move(*symbols),
                       parse_interpreter_name(m->path)};
  }
  const auto name = candidates.empty() ? std::nullopt : parse_interpreter_name(candidates[0]->path);
  if (name && !supported(*name)) {
    why = unsupported(*name, pid, candidates[0]->path);
  } else if (!name) {
    why = "process " + std::to_string(pid) + " (" +
          first_line_of("/proc/" + std::to_string(pid) + "/comm") +
          ") is not a Python program: it maps no python3.X executable and no libpython3.X.so";
  } else {
    why = "no _PyRuntime symbol in " + candidates[0]->path +
          (elf_why.empty() ? "" : " (" + elf_why + ")");
  }
  return std::nullopt;
}

enum class Outcome {
  kOk,
  kChanging,  // what was read did not check out: the stack may have changed under the read
  kFailed,    // reading again will not help (no access, process gone, interpreter not running)
};

}  // namespace

struct PythonStackReader::Impl {
  // A code object decoded once: reused while the same code object (its address and the
  // pointers it holds) is found again.
  struct Code {
    std::uint64_t filename = 0, name = 0, qualname = 0, linetable = 0;
    int first_line = 0;
    PythonFrame frame;
    std::vector<std::uint8_t> table;
  };
  struct Step {  // one Python frame of the walk
    std::uint64_t code = 0;
    std::uint64_t instr = 0;
  };
  explicit Impl(int pid_in) : pid(pid_in), memory(pid_in), blocks(memory) {}

  bool load(const Interpreter& found, std::string& why);
  bool load_layout(const Interpreter& found, std::uint64_t py_version, std::string& why);
  bool read_stack(PythonStack& out, std::string& why);
  Outcome attempt(PythonStack& out, std::string& why);
  Outcome find_main_thread(std::string& why);
  bool is_main_thread(std::uint64_t tstate, std::uint64_t interp, bool any_thread);
  Outcome walk_frames(std::uint64_t frame, PythonStack& out, std::string& why);
  Outcome decode(std::size_t index, const Step& step, PythonFrame& out, std::string& why);
  Outcome read_code(const std::byte* header, Code& code, std::size_t index, std::string& why);
  std::optional<std::string> read_text(std::uint64_t address);
  std::optional<std::vector<std::uint8_t>> read_table(std::uint64_t address);
  Outcome fail(std::string& why, const std::string& text, Outcome outcome = Outcome::kChanging);
  Outcome read_failed(std::string& why, const std::string& what, std::uint64_t address);

  int pid;
  int own_namespace_pid = 0;
  std::string path;
  CPythonLayout layout;
  std::uint64_t runtime = 0, code_type = 0, unicode_type = 0, bytes_type = 0;
  detail::RemoteMemory memory;
  detail::BlockCache blocks;
  std::uint64_t main_interp = 0;
  std::uint64_t main_thread = 0;     // its PyThreadState, once found
  bool main_thread_is_last = false;  // found as the last of the list, not by its TID
  std::unordered_map<std::uint64_t, Code> codes;
  std::vector<Step> steps;  // scratch of each read, kept for its capacity
  std::vector<std::uint64_t> code_addresses;
};

Outcome PythonStackReader::Impl::fail(std::string& why, const std::string& text, Outcome outcome) {
  why = "CPython 3." + std::to_string(layout.minor) + ": " + text;
  return outcome;
}

Outcome PythonStackReader::Impl::read_failed(std::string& why, const std::string& what,
                                             std::uint64_t address) {
  const int err = memory.error();
  if (err == ESRCH)
    return fail(why, "process " + std::to_string(pid) + " has exited", Outcome::kFailed);
  if (err == EPERM || err == EACCES)
    return fail(why,
                detail::ptrace_denied_reason(pid, detail::yama_ptrace_scope(),
                                             detail::has_cap_sys_ptrace()),
                Outcome::kFailed);
  return fail(why, what + " at " + hex(address) + " cannot be read (" + std::strerror(err) + ")");
}

// Whether `tstate` is a thread state of `interp`, and, unless `any_thread`, that of the thread
// whose TID is the process's PID: the main thread.
bool PythonStackReader::Impl::is_main_thread(std::uint64_t tstate, std::uint64_t interp,
                                             bool any_thread) {
  std::array<std::byte, kMaxStruct> t;
  return blocks.read(tstate, t.data(), layout.thread_bytes()) &&
         field<std::uint64_t>(t.data(), layout.thread_interp) == interp &&
         (any_thread || field<std::uint64_t>(t.data(), layout.thread_native_id) ==
                            static_cast<std::uint64_t>(own_namespace_pid));
}

// The main interpreter is the first created: the last of the list. Its main thread's state is the
// one whose native thread id is the process's PID; where none is (a PID namespace this process
// cannot see into), the last of its list, the first created.
Outcome PythonStackReader::Impl::find_main_thread(std::string& why) {
  if (main_thread && is_main_thread(main_thread, main_interp, main_thread_is_last))
    return Outcome::kOk;
  main_thread = 0;
  std::uint64_t interp = 0;
  if (!blocks.read(runtime + layout.runtime_interpreters_head, interp))
    return read_failed(why, "_PyRuntime", runtime);
  if (!interp)
    return fail(why, "no interpreter: not initialized yet, or finalized", Outcome::kFailed);
  for (int i = 0; i < 64; ++i) {
    std::uint64_t next = 0;
    if (!blocks.read(interp + layout.interp_next, next))
      return read_failed(why, "an interpreter", interp);
    if (!next) break;
    interp = next;
  }
  std::uint64_t tstate = 0, last = 0;
  if (!blocks.read(interp + layout.interp_threads_head, tstate))
    return read_failed(why, "the interpreter", interp);
  for (int i = 0; tstate && i < kMaxThreads && !main_thread; ++i) {
    if (is_main_thread(tstate, interp, false)) main_thread = tstate;
    last = tstate;
    if (!blocks.read(tstate + layout.thread_next, tstate))
      return read_failed(why, "a thread state", last);
  }
  main_thread_is_last = !main_thread;
  if (!main_thread) main_thread = last;
  main_interp = interp;
  if (!main_thread) return fail(why, "the interpreter has no thread state yet", Outcome::kFailed);
  return Outcome::kOk;
}

Outcome PythonStackReader::Impl::attempt(PythonStack& out, std::string& why) {
  // The main thread's state, its frames and their code objects, where the last read found them,
  // in one system call: the state then checks out as the main thread's without a read of its own.
  blocks.refresh();
  if (const Outcome found = find_main_thread(why); found != Outcome::kOk) return found;
  std::uint64_t frame = 0;
  if (!blocks.read(main_thread + layout.thread_current_frame, frame))
    return read_failed(why, "the main thread's state", main_thread);
  if (layout.cframe_current_frame.has_value() && frame &&
      !blocks.read(frame + *layout.cframe_current_frame, frame))
    return read_failed(why, "the main thread's _PyCFrame", frame);
  return walk_frames(frame, out, why);
}

// Innermost first: each frame's code and instruction, then the code objects in one batch.
Outcome PythonStackReader::Impl::walk_frames(std::uint64_t frame, PythonStack& out,
                                             std::string& why) {
  steps.clear();
  std::array<std::byte, kMaxStruct> f;
  // Entry frames of C (3.12+) between Python frames count towards the bound too.
  for (int hops = 0; frame && hops < 2 * kMaxFrames && steps.size() < kMaxFrames; ++hops) {
    if (!blocks.read(frame, f.data(), layout.frame_bytes()))
      return read_failed(why, "frame " + std::to_string(steps.size()), frame);
    const int owner = static_cast<signed char>(f[layout.frame_owner]);
    if (owner < 0 || owner > layout.owner_max)
      return fail(why, "frame " + std::to_string(steps.size()) + " has no valid owner (" +
                           std::to_string(owner) + ")");
    if (owner != layout.owner_cstack)
      steps.push_back({field<std::uint64_t>(f.data(), layout.frame_code),
                       field<std::uint64_t>(f.data(), layout.frame_instr)});
    frame = field<std::uint64_t>(f.data(), layout.frame_previous);
  }
  out.truncated = frame != 0;
  code_addresses.clear();
  for (const Step& step : steps) code_addresses.push_back(step.code);
  blocks.prefetch(code_addresses, layout.code_bytes());
  out.frames.resize(steps.size());
  for (std::size_t i = 0; i < steps.size(); ++i)
    if (const Outcome o = decode(i, steps[i], out.frames[i], why); o != Outcome::kOk) return o;
  return Outcome::kOk;
}

Outcome PythonStackReader::Impl::decode(std::size_t index, const Step& step, PythonFrame& out,
                                        std::string& why) {
  const auto which = [index] { return "frame " + std::to_string(index); };
  if (!step.code) return fail(why, which() + " has no code object");
  std::array<std::byte, kMaxStruct> header;
  if (!blocks.read(step.code, header.data(), layout.code_bytes()))
    return read_failed(why, which() + "'s code object", step.code);
  if (field<std::uint64_t>(header.data(), layout.ob_type) != code_type)
    return fail(why, which() + "'s code object is not a code object");
  if (codes.size() >= kMaxCachedCodes && !codes.contains(step.code)) codes.clear();
  Code& code = codes[step.code];
  if (code.filename != field<std::uint64_t>(header.data(), layout.code_filename) ||
      code.name != field<std::uint64_t>(header.data(), layout.code_name) ||
      code.qualname != field<std::uint64_t>(header.data(), layout.code_qualname) ||
      code.linetable != field<std::uint64_t>(header.data(), layout.code_linetable) ||
      code.first_line != field<std::int32_t>(header.data(), layout.code_firstlineno)) {
    if (const Outcome o = read_code(header.data(), code, index, why); o != Outcome::kOk) {
      codes.erase(step.code);
      return o;
    }
  }
  out = code.frame;
  const auto offset = static_cast<std::int64_t>(step.instr - (step.code + layout.code_adaptive));
  out.line = detail::line_of_instruction(code.table, code.first_line, offset);
  return Outcome::kOk;
}

Outcome PythonStackReader::Impl::read_code(const std::byte* header, Code& code, std::size_t index,
                                           std::string& why) {
  code.filename = field<std::uint64_t>(header, layout.code_filename);
  code.name = field<std::uint64_t>(header, layout.code_name);
  code.qualname = field<std::uint64_t>(header, layout.code_qualname);
  code.linetable = field<std::uint64_t>(header, layout.code_linetable);
  code.first_line = field<std::int32_t>(header, layout.code_firstlineno);
  const std::string which = "frame " + std::to_string(index) + "'s ";
  auto filename = read_text(code.filename);
  if (!filename) return fail(why, which + "co_filename is not a str");
  auto name = read_text(code.name);
  if (!name) return fail(why, which + "co_name is not a str");
  auto qualname = read_text(code.qualname);
  if (!qualname) return fail(why, which + "co_qualname is not a str");
  auto table = read_table(code.linetable);
  if (!table) return fail(why, which + "co_linetable is not a bytes object");
  code.frame = {std::move(*filename), std::move(*name), std::move(*qualname), 0};
  code.table = std::move(*table);
  return Outcome::kOk;
}

// A compact str (every str a code object holds is one): ASCII, latin-1, UCS-2 or UCS-4.
std::optional<std::string> PythonStackReader::Impl::read_text(std::uint64_t address) {
  std::array<std::byte, kMaxStruct> header;
  if (!address || !blocks.read(address, header.data(), layout.unicode_ascii_size) ||
      field<std::uint64_t>(header.data(), layout.ob_type) != unicode_type)
    return std::nullopt;
  const auto length = field<std::uint64_t>(header.data(), layout.unicode_length);
  const auto state = field<std::uint32_t>(header.data(), layout.unicode_state);
  const int kind = (state >> 2) & 7;
  const bool compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
  if (!compact || length > kMaxText || (ascii && kind != 1)) return std::nullopt;
  std::vector<std::byte> text(length * kind);
  const std::uint64_t data =
      address + (ascii ? layout.unicode_ascii_size : layout.unicode_compact_size);
  if (!blocks.read(data, text.data(), text.size())) return std::nullopt;
  if (ascii) return std::string(reinterpret_cast<const char*>(text.data()), text.size());
  return detail::utf8_of(text, kind);
}

std::optional<std::vector<std::uint8_t>> PythonStackReader::Impl::read_table(
    std::uint64_t address) {
  std::array<std::byte, kMaxStruct> header;
  if (!address || !blocks.read(address, header.data(), layout.bytes_data) ||
      field<std::uint64_t>(header.data(), layout.ob_type) != bytes_type)
    return std::nullopt;
  const auto size = field<std::uint64_t>(header.data(), layout.bytes_size);
  std::vector<std::uint8_t> table;
  if (size > kMaxLineTable) return table;  // a bytes object still: its lines are not read
  table.resize(size);
  if (!blocks.read(address + layout.bytes_data, table.data(), table.size())) return std::nullopt;
  return table;
}

bool PythonStackReader::Impl::read_stack(PythonStack& out, std::string& why) {
  for (int i = 0; i < kAttempts; ++i) {
    const Outcome o = attempt(out, why);
    if (o == Outcome::kOk) return true;
    if (o == Outcome::kFailed) break;
    main_thread = 0;  // found again on the next attempt, in case it was what changed
  }
  out.frames.clear();
  return false;
}

// The addresses of the symbols a read needs, and the layout of the version the file is named for.
bool PythonStackReader::Impl::load(const Interpreter& found, std::string& why) {
  if (found.name && !supported(*found.name)) {
    why = unsupported(*found.name, pid, found.path);
    return false;
  }
  std::array<std::uint64_t, 5> at{};
  for (std::size_t i = 0; i < kSymbols.size(); ++i) {
    const auto value = found.symbols.values.find(kSymbols[i]);
    if (value == found.symbols.values.end()) {
      why = found.path + " has no " + std::string(kSymbols[i]) + " symbol" +
            (kSymbols[i] == "Py_Version" ? ": a CPython older than 3.11, which is not supported"
                                         : "");
      return false;
    }
    at[i] = value->second + found.bias;
  }
  path = found.path;
  runtime = at[0];  // in kSymbols' order
  code_type = at[1];
  unicode_type = at[2];
  bytes_type = at[3];
  own_namespace_pid = pid_in_own_namespace(pid);
  return load_layout(found, at[4], why);
}

// The version is the one the file is named for, and its Py_Version (3.11+) says; 3.13's layout
// comes from its own _Py_DebugOffsets.
bool PythonStackReader::Impl::load_layout(const Interpreter& found, std::uint64_t py_version,
                                          std::string& why) {
  layout.minor = found.name ? found.name->minor : 0;
  std::uint64_t hex_version = 0;
  if (!memory.read(py_version, &hex_version, sizeof hex_version)) {
    read_failed(why, "Py_Version", py_version);
    return false;
  }
  const InterpreterName running{static_cast<int>(hex_version >> 24),
                                static_cast<int>((hex_version >> 16) & 0xff), ""};
  if (found.name && (running.major != found.name->major || running.minor != found.name->minor)) {
    why = found.path + " is named for " + std::to_string(found.name->major) + "." +
          std::to_string(found.name->minor) + " but its Py_Version says " +
          std::to_string(running.major) + "." + std::to_string(running.minor);
    return false;
  }
  if (!supported(running)) {
    why = unsupported(running, pid, found.path);
    return false;
  }
  if (running.minor < 13) {
    layout = *detail::builtin_layout(running.minor);
    return true;
  }
  layout.minor = running.minor;
  std::vector<std::byte> offsets(detail::debug_offsets_bytes());
  if (!memory.read(runtime, offsets.data(), offsets.size())) {
    read_failed(why, "_PyRuntime", runtime);
    return false;
  }
  std::string offsets_why;
  const auto read = detail::layout_from_debug_offsets(offsets, &offsets_why);
  if (!read) {
    fail(why, offsets_why);
    return false;
  }
  layout = *read;
  if (std::max({layout.thread_bytes(), layout.frame_bytes(), layout.code_bytes(),
                layout.unicode_ascii_size, layout.bytes_data}) > kMaxStruct) {
    fail(why, "_Py_DebugOffsets places a field further than any 3.13 does");
    return false;
  }
  return true;
}

std::optional<PythonStackReader> PythonStackReader::open(int pid, std::string* why_not) {
  std::string why;
  auto impl = std::make_unique<Impl>(pid);
  const auto found = find_interpreter(pid, why);
  if (!found || !impl->load(*found, why)) {
    if (why_not) *why_not = why;
    return std::nullopt;
  }
  return PythonStackReader(std::move(impl));
}

PythonStackReader::PythonStackReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PythonStackReader::~PythonStackReader() = default;
PythonStackReader::PythonStackReader(PythonStackReader&&) noexcept = default;
PythonStackReader& PythonStackReader::operator=(PythonStackReader&&) noexcept = default;

std::optional<PythonStack> PythonStackReader::read_main_thread(std::string* why_not) {
  PythonStack stack;
  if (!read_main_thread(stack, why_not)) return std::nullopt;
  return stack;
}

bool PythonStackReader::read_main_thread(PythonStack& into, std::string* why_not) {
  std::string why;
  if (impl_->read_stack(into, why)) return true;
  if (why_not) *why_not = why;
  return false;
}

int PythonStackReader::pid() const { return impl_->pid; }
std::string PythonStackReader::version() const {
  return "3." + std::to_string(impl_->layout.minor);
}
const std::string& PythonStackReader::interpreter_path() const { return impl_->path; }

const PythonFrame* innermost_frame(const PythonStack& stack) {
  return stack.frames.empty() ? nullptr : &stack.frames.front();
}

namespace {

// Whether a frame of the stack runs code from a file whose path holds one of `places`.
bool any_frame_in(const PythonStack& stack, std::initializer_list<std::string_view> places) {
  return std::any_of(stack.frames.begin(), stack.frames.end(), [&](const PythonFrame& f) {
    return std::any_of(places.begin(), places.end(), [&](std::string_view place) {
      return f.filename.find(place) != std::string::npos;
    });
  });
}

}  // namespace

bool is_loading_frame(const PythonStack& stack) { return any_frame_in(stack, {"/torch/utils/data/"}); }

bool is_torch_wait_frame(const PythonStack& stack) {
  return any_frame_in(stack, {"/torch/autograd/", "/torch/distributed/", "/torch/nn/parallel/",
                              "/torch/cuda/", "/torch/_tensor.py"});
}

}  // namespace feedscope
