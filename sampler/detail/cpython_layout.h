#pragma once
// Where CPython 3.11 to 3.13 (x86-64 and other LP64 Linux, default build: not free-threaded) keep
// what a reader of a thread's Python stack follows: _PyRuntime -> interpreter -> thread states ->
// frames (_PyInterpreterFrame) -> code objects -> their file and function names (compact str) and
// line table (bytes). 3.11 and 3.12 from offsetof() over their headers (Include/internal/
// pycore_runtime.h, pycore_interp.h, pycore_frame.h, cpython/pystate.h, cpython/code.h); 3.13
// from the _Py_DebugOffsets it keeps at the start of _PyRuntime for tools like this one.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace feedscope::detail {

struct CPythonLayout {
  int minor = 0;  // 3.minor
  // _PyRuntimeState
  std::uint64_t runtime_interpreters_head = 0;
  // PyInterpreterState
  std::uint64_t interp_next = 0;
  std::uint64_t interp_threads_head = 0;
  // PyThreadState
  std::uint64_t thread_next = 0;
  std::uint64_t thread_interp = 0;
  std::uint64_t thread_native_id = 0;  // the thread's TID: the process's PID for its main thread
  // 3.13: the current frame. 3.11, 3.12: the _PyCFrame, which holds it at cframe_current_frame.
  std::uint64_t thread_current_frame = 0;
  std::optional<std::uint64_t> cframe_current_frame;
  // _PyInterpreterFrame
  std::uint64_t frame_code = 0;  // f_code; 3.13 f_executable (a code object, or None)
  std::uint64_t frame_previous = 0;
  std::uint64_t frame_instr = 0;  // prev_instr; 3.13 instr_ptr. Both index the code's units alike
  std::uint64_t frame_owner = 0;
  // FRAME_OWNED_BY_CSTACK (3.12+): an entry frame the C code pushes, running no Python code. -1:
  // none (3.11 marks entry frames with a flag instead, and they do run Python code).
  int owner_cstack = -1;
  int owner_max = 2;  // any owner above this is not a frame: the read is stale or misplaced
  // PyCodeObject
  std::uint64_t code_filename = 0;
  std::uint64_t code_name = 0;
  std::uint64_t code_qualname = 0;
  std::uint64_t code_linetable = 0;
  std::uint64_t code_firstlineno = 0;  // an int
  std::uint64_t code_adaptive = 0;     // co_code_adaptive: where the instructions start
  // PyObject, compact str (PyASCIIObject / PyCompactUnicodeObject), bytes
  std::uint64_t ob_type = 8;
  std::uint64_t unicode_length = 16;
  std::uint64_t unicode_state = 32;
  std::uint64_t unicode_ascii_size = 0;    // sizeof(PyASCIIObject): an ASCII str's text follows
  std::uint64_t unicode_compact_size = 0;  // sizeof(PyCompactUnicodeObject): any other str's
  std::uint64_t bytes_size = 16;
  std::uint64_t bytes_data = 32;

  // How much of each structure a reader needs, from its start.
  std::size_t thread_bytes() const;
  std::size_t frame_bytes() const;
  std::size_t code_bytes() const;
};

// The fixed layouts of 3.11 and 3.12; nullopt for any other minor version.
std::optional<CPythonLayout> builtin_layout(int minor);

// How many bytes of _PyRuntime hold the part of CPython 3.13's _Py_DebugOffsets read here.
std::size_t debug_offsets_bytes();
// 3.13's layout from the _Py_DebugOffsets at the start of its _PyRuntime; nullopt (with why) where
// the cookie, the version or a size does not check out, or the build is free-threaded.
std::optional<CPythonLayout> layout_from_debug_offsets(std::span<const std::byte> bytes,
                                                       std::string* why_not);

// The source line of the instruction `byte_offset` bytes into a code object's instructions, from
// its co_linetable (the location table of 3.11+, CPython's Objects/locations.md); a negative offset
// (a frame not started) is its first line. 0 where the table has no line for it.
int line_of_instruction(std::span<const std::uint8_t> linetable, int first_line,
                        std::int64_t byte_offset);

// A compact str's characters (`kind` bytes each: 1 latin-1, 2 UCS-2, 4 UCS-4) as UTF-8;
// nullopt for another kind or a code point past U+10FFFF. Lone surrogates are written as
// U+FFFD: a name can hold one only by escaping from the file system's encoding.
std::optional<std::string> utf8_of(std::span<const std::byte> text, int kind);

}  // namespace feedscope::detail
