#include "profiler/data_files.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>

#include "loader/image_format.h"

namespace feedscope {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// `name` in lower case.
bool is_image(const std::string& name) {
  std::string_view extensions = kImageExtensions;  // ".jpg .jpeg ...", ImageFolder's
  while (!extensions.empty()) {
    const std::size_t space = extensions.find(' ');
    if (ends_with(name, extensions.substr(0, space))) return true;
    extensions.remove_prefix(space == std::string_view::npos ? extensions.size() : space + 1);
  }
  return false;
}

std::optional<std::string> read_link(const std::string& path) {
  char target[4096];
  const ssize_t n = ::readlink(path.c_str(), target, sizeof target - 1);
  if (n <= 0) return std::nullopt;
  return std::string(target, static_cast<std::size_t>(n));
}

std::string parent(const std::string& path) {
  return std::filesystem::path(path).parent_path().string();
}

}  // namespace

DataFilesSeen::DataFilesSeen(ProcFs proc, std::size_t max_files)
    : proc_(std::move(proc)), max_files_(max_files) {}

bool DataFilesSeen::full() const {
  const std::lock_guard lock(mutex_);
  return images_.size() + tars_.size() + tfrecords_.size() >= max_files_;
}

void DataFilesSeen::look(int pid) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  for (const std::string& fd : proc_.list_dir(dir)) {
    const std::optional<std::string> target = read_link(proc_.root() + dir + "/" + fd);
    if (!target || target->empty() || target->front() != '/') continue;  // pipes, sockets
    const std::lock_guard lock(mutex_);
    keep(*target);
  }
}

bool DataFilesSeen::keep(const std::string& path) {
  const std::string name = lower(path);
  std::set<std::string>* into = nullptr;
  if (ends_with(name, ".tar") || ends_with(name, ".tar.gz") || ends_with(name, ".tgz"))
    into = &tars_;
  else if (ends_with(name, ".tfrecord") || ends_with(name, ".tfrecords"))
    into = &tfrecords_;
  else if (is_image(name))
    into = &images_;
  if (into == nullptr) return false;
  if (images_.size() + tars_.size() + tfrecords_.size() < max_files_) into->insert(path);
  return true;
}

void DataFilesSeen::look_at_arguments(const std::vector<std::string>& arguments) {
  namespace fs = std::filesystem;
  constexpr int kFromAFolder = 8;  // enough for dataset() to find the root
  const std::lock_guard lock(mutex_);
  const std::size_t before = images_.size() + tars_.size() + tfrecords_.size();
  for (std::string arg : arguments) {
    if (const std::size_t eq = arg.find('='); arg.rfind("-", 0) == 0 && eq != std::string::npos)
      arg = arg.substr(eq + 1);  // --data=DIR
    std::error_code ec;
    const fs::path path = fs::absolute(arg, ec);
    if (ec || arg.empty() || arg.front() == '-') continue;
    if (fs::is_regular_file(path, ec)) {
      keep(path.lexically_normal().string());
      continue;
    }
    if (!fs::is_directory(path, ec)) continue;
    // Its shards, or its classes' images: ROOT/FILE and ROOT/CLASS/FILE, a few of each.
    int kept = 0;
    for (const fs::directory_entry& e : fs::directory_iterator(path, ec)) {
      if (kept >= kFromAFolder) break;
      if (e.is_regular_file(ec)) {
        kept += keep(e.path().lexically_normal().string()) ? 1 : 0;
        continue;
      }
      if (!e.is_directory(ec)) continue;
      int in_class = 0;
      for (const fs::directory_entry& f : fs::directory_iterator(e.path(), ec)) {
        if (in_class >= 2 || kept >= kFromAFolder) break;
        if (f.is_regular_file(ec) && keep(f.path().lexically_normal().string())) ++in_class, ++kept;
      }
    }
  }
  from_arguments_ |= images_.size() + tars_.size() + tfrecords_.size() > before;
}

bool DataFilesSeen::from_arguments() const {
  const std::lock_guard lock(mutex_);
  return from_arguments_;
}

std::vector<std::string> DataFilesSeen::files() const {
  const std::lock_guard lock(mutex_);
  std::vector<std::string> out(tars_.begin(), tars_.end());
  out.insert(out.end(), tfrecords_.begin(), tfrecords_.end());
  out.insert(out.end(), images_.begin(), images_.end());
  return out;
}

std::optional<std::string> DataFilesSeen::dataset() const {
  const std::lock_guard lock(mutex_);
  const auto most_frequent = [](const std::set<std::string>& files, int levels) {
    std::map<std::string, int> count;
    for (const std::string& f : files) {
      std::string dir = f;
      for (int i = 0; i < levels; ++i) dir = parent(dir);
      ++count[dir];
    }
    return std::max_element(count.begin(), count.end(),
                            [](const auto& a, const auto& b) { return a.second < b.second; })
        ->first;
  };
  if (!tars_.empty()) return "webdataset:" + most_frequent(tars_, 1);
  if (!tfrecords_.empty()) return "tfrecord:" + most_frequent(tfrecords_, 1);
  if (!images_.empty()) return "images:" + most_frequent(images_, 2);
  return std::nullopt;
}

}  // namespace feedscope
