#include "profiler/program_torch.h"

#include <cctype>
#include <sstream>

namespace feedscope {

namespace {

// `__version__ = '2.11.0+cu130'` in torch/version.py.
std::optional<std::string> python_version_of(const std::string& version_py) {
  std::istringstream in(version_py);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("__version__", 0) != 0) continue;
    const auto open = line.find_first_of("'\"");
    if (open == std::string::npos) continue;
    const auto close = line.find(line[open], open + 1);
    if (close == std::string::npos) continue;
    return line.substr(open + 1, close - open - 1);
  }
  return std::nullopt;
}

std::string first_line(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  return line;
}

std::string directory_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

// The version a mapped library path leads to, or nullopt where it is no torch library.
std::optional<ProgramTorch> torch_of_path(const std::string& path, const ProcFs& fs) {
  const std::string dir = directory_of(path);
  const std::string file = path.substr(dir.size() + 1);
  if (file.rfind("_C.", 0) == 0 && dir.size() >= 6 && dir.compare(dir.size() - 6, 6, "/torch") == 0) {
    if (const auto text = fs.read(dir + "/version.py"))
      if (auto v = python_version_of(*text)) return ProgramTorch{*v, dir + "/version.py"};
    return std::nullopt;
  }
  if (file.rfind("libtorch_cpu.so", 0) != 0) return std::nullopt;
  // A pip wheel's torch/lib, or a libtorch distribution's lib beside its build-version.
  const std::string above = directory_of(dir);
  if (const auto text = fs.read(above + "/version.py"))
    if (auto v = python_version_of(*text)) return ProgramTorch{*v, above + "/version.py"};
  if (const auto text = fs.read(above + "/build-version"); text && !first_line(*text).empty())
    return ProgramTorch{first_line(*text), above + "/build-version"};
  const std::string soname = "libtorch_cpu.so.";
  if (file.size() > soname.size() && file.rfind(soname, 0) == 0)
    return ProgramTorch{file.substr(soname.size()), path};
  return std::nullopt;
}

}  // namespace

std::optional<ProgramTorch> torch_of_maps(const std::string& maps, const ProcFs& fs) {
  std::optional<ProgramTorch> from_soname;
  std::istringstream in(maps);
  for (std::string line; std::getline(in, line);) {
    const auto slash = line.find('/');
    if (slash == std::string::npos || line.find("torch", slash) == std::string::npos) continue;
    auto found = torch_of_path(line.substr(slash), fs);
    if (!found) continue;
    // A version file says more than a soname (a Debian build's "a0", a wheel's "+cu130").
    if (found->source.find("libtorch_cpu.so") == std::string::npos) return found;
    if (!from_soname) from_soname = std::move(found);
  }
  return from_soname;
}

int torch_major(const std::string& version) {
  int major = 0;
  for (const char c : version) {
    if (!std::isdigit(static_cast<unsigned char>(c))) break;
    major = major * 10 + (c - '0');
  }
  return major;
}

void ProgramTorchProbe::look(int pid, std::int64_t now_ns) {
  if (found_ || pid <= 0) return;
  auto [last, first] = last_look_ns_.try_emplace(pid, now_ns);
  if (!first && now_ns - last->second < 1'000'000'000) return;
  last->second = now_ns;
  if (const auto maps = fs_.read("/proc/" + std::to_string(pid) + "/maps"))
    found_ = torch_of_maps(*maps, fs_);
}

}  // namespace feedscope
