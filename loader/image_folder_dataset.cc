#include "loader/image_folder_dataset.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include <tbb/enumerable_thread_specific.h>

#include "loader/detail/image_sample.h"
#include "loader/image_format.h"
#include "loader/jpeg_decoder.h"
#include "loader/sample_rng.h"

namespace feedscope {

namespace {

namespace fs = std::filesystem;

// One directory's image files, as os.walk yields them.
struct Folder {
  std::string path;
  std::vector<std::string> files;
};

class Lister {
 public:
  // os.walk(dir, followlinks=True), minus loops: a folder is not entered again while it is one of
  // the folders being walked (`ancestors`), which is what a symlink loop is.
  void walk(const std::string& dir, std::vector<std::pair<dev_t, ino_t>>& ancestors, std::vector<Folder>& out) {
    struct stat st{};
    if (::stat(dir.c_str(), &st) != 0) throw DatasetError("images: cannot open '" + dir + "': " + std::strerror(errno));
    const std::pair<dev_t, ino_t> id{st.st_dev, st.st_ino};
    if (std::find(ancestors.begin(), ancestors.end(), id) != ancestors.end()) {
      loops.push_back(dir);
      return;
    }
    Folder folder{dir, {}};
    std::vector<std::string> subdirs;
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
      std::string name = e.path().filename().string();
      std::error_code type_ec;
      if (e.is_directory(type_ec)) subdirs.push_back(std::move(name));  // follows a symlink, as os.walk
      else if (has_image_extension(name)) folder.files.push_back(std::move(name));
      else ++skipped;
    }
    if (ec) throw DatasetError("images: cannot list '" + dir + "': " + ec.message());
    std::sort(folder.files.begin(), folder.files.end());
    std::sort(subdirs.begin(), subdirs.end());
    out.push_back(std::move(folder));
    ancestors.push_back(id);
    for (const std::string& sub : subdirs) walk(dir + "/" + sub, ancestors, out);
    ancestors.pop_back();
  }

  std::size_t skipped = 0;
  std::vector<std::string> loops;
};

// A file descriptor closed on every path.
struct File {
  int fd = -1;
  ~File() {
    if (fd >= 0) ::close(fd);
  }
};

// Reads the whole file into `buffer` (grown, never shrunk); returns its size.
std::size_t read_file(const std::string& path, std::vector<std::uint8_t>& buffer, std::string& error) {
  File file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) {
    error = std::string("cannot open: ") + std::strerror(errno);
    return 0;
  }
  struct stat st{};
  if (::fstat(file.fd, &st) != 0) {
    error = std::string("cannot stat: ") + std::strerror(errno);
    return 0;
  }
  const auto size = static_cast<std::size_t>(st.st_size);
  if (buffer.size() < size) buffer.resize(size);
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(file.fd, buffer.data() + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error = std::string("cannot read: ") + std::strerror(errno);
      return 0;
    }
    if (n == 0) break;  // shrank since fstat: decode what is there, and let the decoder judge it
    done += static_cast<std::size_t>(n);
  }
  return done;
}

}  // namespace

// What each loading thread keeps between samples.
struct ImageFolderDataset::Workers {
  struct Scratch : detail::ImageScratch {
    std::vector<std::uint8_t> file;
  };
  tbb::enumerable_thread_specific<Scratch> local;
};

ImageFolderDataset::ImageFolderDataset(Options options)
    : options_(std::move(options)), workers_(std::make_unique<Workers>()) {
  const std::string& root = options_.root;
  if (options_.size < 8 || options_.size > 4096)
    throw DatasetError("images: output size " + std::to_string(options_.size) + " is not allowed; allowed: 8 to 4096");
  spec_.shape = {3, options_.size, options_.size};
  spec_.dtype = DType::float32;

  std::error_code ec;
  if (root.empty()) throw DatasetError("images: no directory given; expected images:DIR");
  const fs::file_status status = fs::status(root, ec);
  if (ec || !fs::exists(status)) throw DatasetError("images: '" + root + "': no such directory");
  if (!fs::is_directory(status)) throw DatasetError("images: '" + root + "' is not a directory");
  try {
    list();
  } catch (const fs::filesystem_error& e) {
    // Advancing a directory iterator throws (e.g. a folder removed while listing).
    throw DatasetError("images: cannot list '" + root + "': " + e.what());
  }
}

void ImageFolderDataset::list() {
  const std::string& root = options_.root;
  std::error_code ec;
  Lister lister;
  // find_classes: os.scandir's entry.is_dir(), which follows a symlink.
  for (const fs::directory_entry& e : fs::directory_iterator(root, ec)) {
    std::error_code type_ec;
    if (e.is_directory(type_ec)) classes_.push_back(e.path().filename().string());
  }
  if (ec) throw DatasetError("images: cannot list '" + root + "': " + ec.message());
  if (classes_.empty())
    throw DatasetError("images: '" + root + "' has no class folders; expected the ImageFolder layout, "
                       "DIR/<class>/<image>.jpg");
  std::sort(classes_.begin(), classes_.end());

  std::string prefix = root;
  while (prefix.size() > 1 && prefix.back() == '/') prefix.pop_back();
  std::vector<std::string> empty;
  for (std::size_t label = 0; label < classes_.size(); ++label) {
    std::vector<Folder> folders;
    std::vector<std::pair<dev_t, ino_t>> ancestors;
    lister.walk(prefix + "/" + classes_[label], ancestors, folders);
    // sorted(os.walk(...)): folders in path order, files sorted within each.
    std::sort(folders.begin(), folders.end(), [](const Folder& a, const Folder& b) { return a.path < b.path; });
    const std::size_t before = paths_.size();
    for (const Folder& folder : folders)
      for (const std::string& file : folder.files) {
        paths_.push_back(folder.path + "/" + file);
        labels_.push_back(static_cast<std::int32_t>(label));
      }
    if (paths_.size() == before) empty.push_back(classes_[label]);
  }
  if (!empty.empty()) {
    std::string names;
    for (std::size_t i = 0; i < empty.size() && i < 10; ++i) names += (i ? ", " : "") + empty[i];
    if (empty.size() > 10) names += ", ... (" + std::to_string(empty.size()) + " in all)";
    throw DatasetError("images: '" + root + "': no image files (" + kImageExtensions + ") in class folder(s) " +
                       names + "; torchvision's ImageFolder refuses such a folder too");
  }
  skipped_ = lister.skipped;
  loops_ = std::move(lister.loops);
}

ImageFolderDataset::~ImageFolderDataset() = default;

std::int64_t ImageFolderDataset::load(std::size_t index, std::span<std::byte> out, LoadContext& ctx) const {
  if (index >= paths_.size())
    throw SampleError(index, name(), "index out of range (size " + std::to_string(paths_.size()) + ")");
  if (out.size() != spec_.bytes())
    throw SampleError(index, paths_[index], "output is " + std::to_string(out.size()) + " bytes, the sample " +
                                                std::to_string(spec_.bytes()));
  const std::string& path = paths_[index];
  Workers::Scratch& w = workers_->local.local();

  std::size_t bytes = 0;
  {
    ScopedSpan span(ctx.spans, ctx.role, Stage::read, ctx.batch);
    std::string error;
    bytes = read_file(path, w.file, error);
    if (!error.empty()) throw SampleError(index, path, error);
  }
  const std::span<const std::uint8_t> data(w.file.data(), bytes);
  SampleRng rng(options_.seed, ctx.epoch, index);
  try {
    detail::decode_image_sample(data, options_, rng, w, ctx, reinterpret_cast<float*>(out.data()));
  } catch (const ImageError& e) {
    throw SampleError(index, path, e.what());
  }
  return labels_[index];
}

std::string ImageFolderDataset::describe(std::size_t index) const {
  return index < paths_.size() ? paths_[index] : name() + "#" + std::to_string(index);
}

SampleFile ImageFolderDataset::sample_file(std::size_t index) const {
  return index < paths_.size() ? probe_image_file(paths_[index]) : Dataset::sample_file(index);
}

std::string ImageFolderDataset::name() const { return "images:" + options_.root; }

std::uint64_t ImageFolderDataset::evict_page_cache() const {
  return drop_cached_files(paths_);
}

}  // namespace feedscope
