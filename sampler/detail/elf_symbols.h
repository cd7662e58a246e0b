#pragma once
// The values of a few named symbols of an ELF64 file (an executable or a shared library), read
// from its .dynsym, then its .symtab for those still missing, and where the file's offset 0 sits
// in its link-time address space: what a reader of another process needs to turn a symbol into
// an address in that process, given where the file is mapped (/proc/PID/maps). ELF parsed with
// <elf.h> alone: no libelf.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace feedscope::detail {

struct ElfSymbols {
  std::uint16_t type = 0;  // ET_EXEC or ET_DYN (PIE executables and libraries)
  // p_vaddr - p_offset of the first PT_LOAD, page-aligned: the link-time address of the byte at
  // file offset 0. A symbol's run-time address is its value + (mapping start of offset 0 - this).
  std::uint64_t file_start_vaddr = 0;
  std::map<std::string, std::uint64_t, std::less<>> values;  // wanted name -> st_value, if defined
};

// nullopt (with why) when the file cannot be read or is not a little-endian ELF64 file. A wanted
// symbol that is absent or undefined is simply not in `values`.
std::optional<ElfSymbols> read_elf_symbols(const std::string& path,
                                           const std::vector<std::string_view>& wanted,
                                           std::string* why_not);

}  // namespace feedscope::detail
