#include "sampler/detail/elf_symbols.h"

#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace feedscope::detail {

namespace {

// A symbol table of a shipped interpreter is a few MiB at most; more means a corrupt header.
constexpr std::uint64_t kMaxTableBytes = 256ull << 20;

class File {
 public:
  explicit File(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {}
  ~File() {
    if (fd_ >= 0) ::close(fd_);
  }
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  bool is_open() const { return fd_ >= 0; }
  bool read(std::uint64_t offset, void* out, std::size_t size) const {
    auto* p = static_cast<char*>(out);
    while (size > 0) {
      const ssize_t n = ::pread(fd_, p, size, static_cast<off_t>(offset));
      if (n <= 0) return false;
      p += n;
      offset += static_cast<std::uint64_t>(n);
      size -= static_cast<std::size_t>(n);
    }
    return true;
  }
  bool read_bytes(std::uint64_t offset, std::uint64_t size, std::vector<char>& out) const {
    if (size > kMaxTableBytes) return false;
    out.resize(size);
    return read(offset, out.data(), out.size());
  }

 private:
  int fd_;
};

bool read_header(const File& file, Elf64_Ehdr& header) {
  return file.read(0, &header, sizeof header) &&
         std::memcmp(header.e_ident, ELFMAG, SELFMAG) == 0 &&
         header.e_ident[EI_CLASS] == ELFCLASS64 && header.e_ident[EI_DATA] == ELFDATA2LSB &&
         header.e_phentsize == sizeof(Elf64_Phdr) && header.e_shentsize == sizeof(Elf64_Shdr);
}

std::optional<std::uint64_t> file_start_vaddr(const File& file, const Elf64_Ehdr& header) {
  for (unsigned i = 0; i < header.e_phnum; ++i) {
    Elf64_Phdr ph;
    if (!file.read(header.e_phoff + i * sizeof ph, &ph, sizeof ph)) return std::nullopt;
    if (ph.p_type == PT_LOAD) return (ph.p_vaddr - ph.p_offset) & ~std::uint64_t{0xfff};
  }
  return std::nullopt;
}

// Adds to `values` the wanted symbols that `table` (a SHT_DYNSYM or SHT_SYMTAB) defines and
// `values` does not hold yet.
void collect(const File& file, const std::vector<Elf64_Shdr>& sections, const Elf64_Shdr& table,
             const std::vector<std::string_view>& wanted, ElfSymbols& out) {
  if (table.sh_link >= sections.size()) return;
  std::vector<char> symbols, names;
  if (!file.read_bytes(table.sh_offset, table.sh_size, symbols) ||
      !file.read_bytes(sections[table.sh_link].sh_offset, sections[table.sh_link].sh_size, names))
    return;
  for (std::size_t at = 0; at + sizeof(Elf64_Sym) <= symbols.size(); at += sizeof(Elf64_Sym)) {
    Elf64_Sym sym;
    std::memcpy(&sym, symbols.data() + at, sizeof sym);
    if (sym.st_shndx == SHN_UNDEF || sym.st_name >= names.size()) continue;
    const char* name = names.data() + sym.st_name;
    const std::string_view view(name, ::strnlen(name, names.size() - sym.st_name));
    for (const std::string_view w : wanted)
      if (view == w && !out.values.contains(w)) out.values.emplace(std::string(w), sym.st_value);
  }
}

}  // namespace

std::optional<ElfSymbols> read_elf_symbols(const std::string& path,
                                           const std::vector<std::string_view>& wanted,
                                           std::string* why_not) {
  const auto fail = [&](const std::string& why) {
    if (why_not) *why_not = path + ": " + why;
    return std::nullopt;
  };
  const File file(path);
  if (!file.is_open()) return fail(std::strerror(errno));
  Elf64_Ehdr header;
  if (!read_header(file, header)) return fail("not a little-endian ELF64 file");
  ElfSymbols out;
  out.type = header.e_type;
  const auto start = file_start_vaddr(file, header);
  if (!start) return fail("no loadable segment");
  out.file_start_vaddr = *start;
  std::vector<Elf64_Shdr> sections(header.e_shnum);
  if (sections.empty() ||
      !file.read(header.e_shoff, sections.data(), sections.size() * sizeof(Elf64_Shdr)))
    return fail("no section headers");
  // .dynsym first: it survives stripping; .symtab fills in what only it has (static symbols).
  for (const std::uint32_t kind : {SHT_DYNSYM, SHT_SYMTAB})
    for (const Elf64_Shdr& s : sections)
      if (s.sh_type == kind) collect(file, sections, s, wanted, out);
  return out;
}

}  // namespace feedscope::detail
