// Stands in for libFuzzer's main in the normal build: feeds every file named on the command line,
// and every file under every directory named, to the target once. ctest runs it over the target's
// checked-in corpus (fuzz/corpus/<target>), so the seeds and each crash's regression input run
// with the test suite, under whatever sanitizers that build uses.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

namespace fs = std::filesystem;

std::vector<fs::path> inputs_of(const fs::path& arg) {
  std::vector<fs::path> files;
  if (!fs::is_directory(arg)) return {arg};
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(arg))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE|DIR...  (runs the fuzz target once on each file)\n", argv[0]);
    return 2;
  }
  std::size_t count = 0;
  for (int i = 1; i < argc; ++i) {
    for (const fs::path& file : inputs_of(argv[i])) {
      std::ifstream in(file, std::ios::binary);
      if (!in) {
        std::fprintf(stderr, "%s: cannot read\n", file.c_str());
        return 1;
      }
      const std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
      // A printed name before each input names the culprit when one crashes.
      std::fprintf(stderr, "%s (%zu bytes)\n", file.c_str(), bytes.size());
      LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
      ++count;
    }
  }
  if (count == 0) {
    std::fprintf(stderr, "no input files found: an empty corpus tests nothing\n");
    return 1;
  }
  std::fprintf(stderr, "replayed %zu inputs\n", count);
  return 0;
}
