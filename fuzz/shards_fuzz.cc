// libFuzzer target: what webdataset:PATTERN and tfrecord:PATTERN read from outside files, before
// any image decode (jpeg_fuzz covers that). The first byte picks the reader: a tar archive
// (TarReader, every member read; gzip too, zlib sniffs it), a serialized tf.train.Example
// (parse_example), or a TFRecord file through TfRecordDataset's stream. Bad input must be a TarError,
// a runtime_error or a SampleError, and every reader must end: a tar reader that reports more
// members than the input has 512-byte blocks, or an Example image outside the input, is a bug.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "loader/detail/tf_example.h"
#include "loader/tar_archive.h"
#include "loader/tfrecord_dataset.h"

namespace {

using namespace feedscope;

[[noreturn]] void broken(const char* what) {
  std::fprintf(stderr, "shards_fuzz: %s\n", what);
  std::abort();
}

// The input as a file the readers can open by path.
struct MemFile {
  explicit MemFile(std::span<const std::uint8_t> bytes) : fd(::memfd_create("shard", 0)) {
    if (fd < 0 || ::write(fd, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) broken("memfd");
    path = "/proc/self/fd/" + std::to_string(fd);
  }
  ~MemFile() { ::close(fd); }
  int fd;
  std::string path;
};

void tar(std::span<const std::uint8_t> bytes) {
  const MemFile file(bytes);
  TarReader reader(file.path);
  TarMember member;
  std::vector<std::uint8_t> data;
  // A gzip stream may inflate to far more than its size; bound the work instead.
  std::size_t members = 0, errors = 0;
  for (;;) {
    try {
      if (!reader.next(member)) return;
      if (++members > 4096) return;
      reader.read(data);
      if (data.size() != member.size) broken("read() returned a size other than the member's");
    } catch (const TarError& e) {
      if (e.framing_lost() || ++errors > 4096) return;
    }
  }
}

void example(std::span<const std::uint8_t> bytes) {
  try {
    const detail::ExampleImage e = detail::parse_example(bytes, kTfImageKey, kTfLabelKey);
    if (!e.image.empty() && (e.image.data() < bytes.data() || e.image.data() + e.image.size() > bytes.data() + bytes.size()))
      broken("the image lies outside the Example");
  } catch (const std::runtime_error&) {
  }
}

void tfrecord(std::span<const std::uint8_t> bytes) {
  const MemFile file(bytes);
  TfRecordDataset::Options o;
  o.pattern = file.path;
  o.image.size = 8;
  o.classes = 1000;
  const TfRecordDataset data(o);
  ShardPlan plan;
  plan.shuffle = false;
  const auto stream = data.open_stream({0}, plan, 0, 0);
  std::vector<float> out(data.spec().bytes() / sizeof(float));
  LoadContext ctx;
  for (int records = 0; records < 256; ++records) {
    try {
      if (!stream->next(std::as_writable_bytes(std::span(out)), ctx)) return;
    } catch (const SampleError&) {
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::span<const std::uint8_t> rest(data + 1, size - 1);
  switch (data[0] % 3) {
    case 0: tar(rest); break;
    case 1: example(rest); break;
    default: tfrecord(rest); break;
  }
  return 0;
}
