#include "sampler/detail/cpython_layout.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>

namespace feedscope::detail {

namespace {

std::size_t end_of(std::initializer_list<std::uint64_t> offsets, std::size_t field = 8) {
  return static_cast<std::size_t>(std::max(offsets)) + field;
}

// The first fields of CPython 3.13's _Py_DebugOffsets (Include/internal/pycore_runtime.h), up to
// the ones read here; the rest of the struct follows them and is not read.
struct DebugOffsets313 {
  char cookie[8];
  std::uint64_t version;
  std::uint64_t free_threaded;
  struct {
    std::uint64_t size, finalizing, interpreters_head;
  } runtime_state;
  struct {
    std::uint64_t size, id, next, threads_head, gc, imports_modules, sysdict, builtins, ceval_gil,
        gil_runtime_state, gil_runtime_state_enabled, gil_runtime_state_locked,
        gil_runtime_state_holder;
  } interpreter_state;
  struct {
    std::uint64_t size, prev, next, interp, current_frame, thread_id, native_thread_id,
        datastack_chunk, status;
  } thread_state;
  struct {
    std::uint64_t size, previous, executable, instr_ptr, localsplus, owner;
  } interpreter_frame;
  struct {
    std::uint64_t size, filename, name, qualname, linetable, firstlineno, argcount, localsplusnames,
        localspluskinds, co_code_adaptive;
  } code_object;
  struct {
    std::uint64_t size, ob_type;
  } pyobject;
  struct {
    std::uint64_t size, tp_name, tp_repr, tp_flags;
  } type_object;
  struct {
    std::uint64_t size, ob_item, ob_size;
  } tuple_object, list_object, dict_object;
  struct {
    std::uint64_t size, ob_fval;
  } float_object;
  struct {
    std::uint64_t size, lv_tag, ob_digit;
  } long_object;
  struct {
    std::uint64_t size, ob_size, ob_sval;
  } bytes_object;
  struct {
    std::uint64_t size, state, length, asciiobject_size;
  } unicode_object;
};

// Every offset within its structure's size, and no structure implausibly large: a check that
// the bytes read are a _Py_DebugOffsets of the layout above, not something else.
bool plausible(const DebugOffsets313& d) {
  constexpr std::uint64_t kMaxStruct = 1 << 20;
  const auto within = [](std::uint64_t size, std::initializer_list<std::uint64_t> offsets) {
    return size > 0 && size <= kMaxStruct && std::max(offsets) + 8 <= size;
  };
  return within(d.runtime_state.size, {d.runtime_state.interpreters_head}) &&
         within(d.interpreter_state.size,
                {d.interpreter_state.next, d.interpreter_state.threads_head}) &&
         within(d.thread_state.size,
                {d.thread_state.next, d.thread_state.interp, d.thread_state.current_frame,
                 d.thread_state.native_thread_id}) &&
         within(d.interpreter_frame.size,
                {d.interpreter_frame.previous, d.interpreter_frame.executable,
                 d.interpreter_frame.instr_ptr, d.interpreter_frame.owner}) &&
         within(d.code_object.size,
                {d.code_object.filename, d.code_object.name, d.code_object.qualname,
                 d.code_object.linetable, d.code_object.firstlineno}) &&
         d.code_object.co_code_adaptive <= d.code_object.size && d.pyobject.ob_type == 8 &&
         within(d.bytes_object.size, {d.bytes_object.ob_size}) &&
         d.bytes_object.ob_sval <= d.bytes_object.size &&
         within(d.unicode_object.size, {d.unicode_object.state, d.unicode_object.length}) &&
         d.unicode_object.asciiobject_size <= d.unicode_object.size;
}

// Location-table varints: 6 bits a byte, low bits first, bit 6 set while more follow.
unsigned read_varint(std::span<const std::uint8_t> table, std::size_t& at) {
  unsigned value = 0;
  for (unsigned shift = 0; at < table.size() && shift < 32; shift += 6) {
    const std::uint8_t byte = table[at++];
    value |= static_cast<unsigned>(byte & 63) << shift;
    if (!(byte & 64)) break;
  }
  return value;
}

int read_signed_varint(std::span<const std::uint8_t> table, std::size_t& at) {
  const unsigned value = read_varint(table, at);
  return value & 1 ? -static_cast<int>(value >> 1) : static_cast<int>(value >> 1);
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp >= 0xd800 && cp <= 0xdfff) cp = 0xfffd;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

}  // namespace

std::size_t CPythonLayout::thread_bytes() const {
  return end_of({thread_next, thread_interp, thread_native_id, thread_current_frame});
}

std::size_t CPythonLayout::frame_bytes() const {
  return std::max(end_of({frame_code, frame_previous, frame_instr}), end_of({frame_owner}, 1));
}

std::size_t CPythonLayout::code_bytes() const {
  return end_of(
      {ob_type, code_filename, code_name, code_qualname, code_linetable, code_firstlineno});
}

std::optional<CPythonLayout> builtin_layout(int minor) {
  CPythonLayout l;
  l.minor = minor;
  l.runtime_interpreters_head = 40;
  l.thread_next = 8;
  l.thread_interp = 16;
  l.thread_current_frame = 56;  // cframe
  l.frame_instr = 56;
  l.code_filename = 112;
  l.code_name = 120;
  l.code_qualname = 128;
  l.code_linetable = 136;
  if (minor == 11) {  // the same in 3.11.2 (Debian 12) and 3.11.7
    l.interp_threads_head = 16;
    l.thread_native_id = 160;
    l.cframe_current_frame = 8;  // after uint8_t use_tracing
    l.frame_code = 32;
    l.frame_previous = 48;
    l.frame_owner = 69;
    l.code_firstlineno = 72;
    l.code_adaptive = 184;
    l.unicode_ascii_size = 48;  // 3.11 still has the wstr pointer
    l.unicode_compact_size = 72;
    return l;
  }
  if (minor == 12) {  // 3.12.1
    l.interp_threads_head = 72;
    l.thread_native_id = 144;
    l.cframe_current_frame = 0;
    l.frame_code = 0;
    l.frame_previous = 8;
    l.frame_owner = 70;
    l.owner_cstack = 3;
    l.owner_max = 3;
    l.code_firstlineno = 68;
    l.code_adaptive = 192;
    l.unicode_ascii_size = 40;
    l.unicode_compact_size = 56;
    return l;
  }
  return std::nullopt;
}

std::size_t debug_offsets_bytes() { return sizeof(DebugOffsets313); }

std::optional<CPythonLayout> layout_from_debug_offsets(std::span<const std::byte> bytes,
                                                       std::string* why_not) {
  const auto fail = [&](const char* why) {
    if (why_not) *why_not = why;
    return std::nullopt;
  };
  DebugOffsets313 d;
  if (bytes.size() < sizeof d) return fail("_Py_DebugOffsets is cut short");
  std::memcpy(&d, bytes.data(), sizeof d);
  if (std::memcmp(d.cookie, "xdebugpy", 8) != 0)
    return fail("_PyRuntime does not start with _Py_DebugOffsets (its cookie is not \"xdebugpy\")");
  if ((d.version >> 24) != 3 || ((d.version >> 16) & 0xff) != 13)
    return fail("_Py_DebugOffsets' version is not 3.13");
  if (d.free_threaded) return fail("a free-threaded build (python3.13t) is not supported");
  if (!plausible(d)) return fail("_Py_DebugOffsets holds an offset outside its structure");
  CPythonLayout l;
  l.minor = 13;
  l.runtime_interpreters_head = d.runtime_state.interpreters_head;
  l.interp_next = d.interpreter_state.next;
  l.interp_threads_head = d.interpreter_state.threads_head;
  l.thread_next = d.thread_state.next;
  l.thread_interp = d.thread_state.interp;
  l.thread_native_id = d.thread_state.native_thread_id;
  l.thread_current_frame = d.thread_state.current_frame;
  l.frame_code = d.interpreter_frame.executable;
  l.frame_previous = d.interpreter_frame.previous;
  l.frame_instr = d.interpreter_frame.instr_ptr;
  l.frame_owner = d.interpreter_frame.owner;
  l.owner_cstack = 3;
  l.owner_max = 3;
  l.code_filename = d.code_object.filename;
  l.code_name = d.code_object.name;
  l.code_qualname = d.code_object.qualname;
  l.code_linetable = d.code_object.linetable;
  l.code_firstlineno = d.code_object.firstlineno;
  l.code_adaptive = d.code_object.co_code_adaptive;
  l.ob_type = d.pyobject.ob_type;
  l.unicode_length = d.unicode_object.length;
  l.unicode_state = d.unicode_object.state;
  l.unicode_ascii_size = d.unicode_object.asciiobject_size;
  l.unicode_compact_size = d.unicode_object.asciiobject_size + 16;  // + utf8_length, utf8
  l.bytes_size = d.bytes_object.ob_size;
  l.bytes_data = d.bytes_object.ob_sval;
  return l;
}

int line_of_instruction(std::span<const std::uint8_t> table, int first_line,
                        std::int64_t byte_offset) {
  if (byte_offset < 0) return first_line;
  int line = first_line;
  std::int64_t start = 0;
  std::size_t at = 0;
  while (at < table.size()) {
    const std::uint8_t head = table[at];
    if (!(head & 0x80)) return 0;  // every entry starts with its high bit set
    const int code = (head >> 3) & 15;
    const std::int64_t end = start + ((head & 7) + 1) * 2;  // code units of 2 bytes
    std::size_t next = at + 1;
    if (code == 13 || code == 14)
      line += read_signed_varint(table, next);  // NO_COLUMNS, LONG
    else if (code == 11 || code == 12)
      line += code - 10;                                          // ONE_LINE1, 2
    if (byte_offset < end) return code == 15 ? 0 : line;          // 15: NONE
    while (next < table.size() && !(table[next] & 0x80)) ++next;  // the entry's other fields
    at = next;
    start = end;
  }
  return 0;
}

std::optional<std::string> utf8_of(std::span<const std::byte> text, int kind) {
  if (kind != 1 && kind != 2 && kind != 4) return std::nullopt;
  std::string out;
  out.reserve(text.size());
  for (std::size_t at = 0; at + kind <= text.size(); at += kind) {
    std::uint32_t cp = 0;
    std::memcpy(&cp, text.data() + at, kind);  // little-endian: the low bytes come first
    if (cp > 0x10ffff) return std::nullopt;
    append_utf8(out, cp);
  }
  return out;
}

}  // namespace feedscope::detail
