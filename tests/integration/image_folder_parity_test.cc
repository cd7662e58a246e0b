// images:DIR against torchvision's ImageFolder on a folder of traps: every format torchvision
// reads (PNG, WebP, BMP, PPM/PGM, TIFF) in its grey, palette, alpha and 16-bit variants, JPEGs
// that are grey, CMYK, progressive, arithmetic-coded, EXIF-rotated, 1x1 and 8000x6000, a PNG named
// .JPEG, a class folder and files symlinked from outside the root, nested and hidden folders and
// files, an empty file, a text file named like an image and truncated files of every format. For each: the class list, the sample
// list with its labels, which samples fail to load, and the pixels of the eval transform. Python
// (PIL) writes the files, so they are what a real writer makes; nothing is committed. Needs
// /usr/bin/python3 with torchvision ($FEEDSCOPE_PYTHON to choose another); skipped without.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "loader/image_dataset_maker.h"
#include "loader/image_folder_dataset.h"
#include "loader/image_format.h"
#include "loader/jpeg_encoder.h"
#include "tests/support/process.h"
#include "tests/support/reference_python.h"
#include "tests/support/temp_dir.h"

namespace feedscope {
namespace {

namespace fs = std::filesystem;

// argv: ROOT OUTSIDE. Writes the trap folder; exit 77 without PIL, numpy or torchvision.
constexpr const char* kMake = R"(
import os, struct, sys, zlib
try:
    import numpy as np
    from PIL import Image
    import torchvision
except ImportError:
    sys.exit(77)
root, outside = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(7)

def photo(w, h):
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    base = np.stack([128 + 100 * np.sin(x / 23 + c) * np.cos(y / 31 - c) for c in range(3)], axis=-1)
    noise = rng.normal(0, 12, size=(h, w, 3)).astype(np.float32)
    return np.clip(base + noise, 0, 255).astype(np.uint8)

def rgb(w=317, h=211):
    return Image.fromarray(photo(w, h))

def save(rel, img, **kw):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    img.save(path, **kw)

def raw_png(rel, w, h, color_type, depth, rows):
    def chunk(t, d):
        return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)
    body = b''.join(b'\0' + r for r in rows)
    data = (b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, depth, color_type, 0, 0, 0)) +
            chunk(b'IDAT', zlib.compress(body)) + chunk(b'IEND', b''))
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, 'wb').write(data)

save('jpeg/normal.jpg', rgb(), quality=90)
save('jpeg/grey.jpg', rgb().convert('L'), quality=90)
save('jpeg/cmyk.jpg', rgb().convert('CMYK'), quality=90)
save('jpeg/progressive.jpg', rgb(), quality=90, progressive=True)
exif = Image.Exif()
exif[0x0112] = 6  # rotate 90 degrees on display; torchvision does not apply it
save('jpeg/exif_rotated.jpg', rgb(300, 200), exif=exif.tobytes())
save('jpeg/one_pixel.jpg', Image.new('RGB', (1, 1), (200, 30, 90)))
y, x = np.mgrid[0:6000, 0:8000]
big = np.stack([(x * 255 // 8000), (y * 255 // 6000), ((x + y) % 256)], axis=-1).astype(np.uint8)
save('jpeg/huge_8000x6000.jpg', Image.fromarray(big), quality=85)
save('jpeg/png_named.JPEG', rgb(), format='PNG')

save('png/rgb.png', rgb())
rgba = np.concatenate([photo(317, 211), rng.integers(0, 256, (211, 317, 1), dtype=np.uint8)], axis=-1)
save('png/rgba.png', Image.fromarray(rgba, 'RGBA'))
save('png/palette.png', rgb().convert('P', palette=Image.ADAPTIVE, colors=200))
p = rgb().convert('P', palette=Image.ADAPTIVE, colors=64)
save('png/palette_transparent.png', p, transparency=5)
save('png/grey.png', rgb().convert('L'))
save('png/grey_alpha.png', Image.fromarray(rgba, 'RGBA').convert('LA'))
save('png/bilevel.png', rgb().convert('1'))
g16 = (rng.integers(0, 1024, (97, 131))).astype(np.uint16)  # many values above 255: PIL clips
save('png/grey16.png', Image.fromarray(g16))
rows = [rng.integers(0, 256, 131 * 6, dtype=np.uint8).tobytes() for _ in range(97)]
raw_png('png/rgb16.png', 131, 97, 2, 16, rows)
rows = [rng.integers(0, 256, 131 * 8, dtype=np.uint8).tobytes() for _ in range(97)]
raw_png('png/rgba16.png', 131, 97, 6, 16, rows)
save('png/.dotfile.png', rgb(64, 64))

save('webp/lossy.webp', rgb(), quality=80)
save('webp/lossless_alpha.webp', Image.fromarray(rgba, 'RGBA'), lossless=True)

save('bmp/rgb.bmp', rgb())
save('bmp/palette.bmp', rgb().convert('P', palette=Image.ADAPTIVE, colors=100))
save('bmp/grey.bmp', rgb().convert('L'))
save('bmp/rgba.bmp', Image.fromarray(rgba, 'RGBA'))

save('pnm/rgb.ppm', rgb())
save('pnm/grey.pgm', rgb().convert('L'))

save('tiff/rgb.tif', rgb())
save('tiff/grey.tiff', rgb().convert('L'))
save('tiff/lzw.tif', rgb(), compression='tiff_lzw')
save('tiff/palette.tif', rgb().convert('P', palette=Image.ADAPTIVE, colors=50))
save('tiff/cmyk.tif', rgb().convert('CMYK'))
save('tiff/rgba.tif', Image.fromarray(rgba, 'RGBA'))
save('tiff/grey16.tif', Image.fromarray(g16))

save('nested/a/b/deep.png', rgb(50, 40))
save('nested/top.bmp', rgb(40, 50))
save('.hidden_class/x.webp', rgb(60, 60))
os.makedirs(os.path.join(root, 'errors'))
open(os.path.join(root, 'errors/empty.jpg'), 'wb').close()
open(os.path.join(root, 'errors/text.png'), 'w').write('not a picture\n')
open(os.path.join(root, 'errors/readme.txt'), 'w').write('not listed\n')
save('errors/fine.png', rgb(33, 33))
for name in ['png/rgb.png', 'webp/lossy.webp', 'bmp/rgb.bmp', 'tiff/rgb.tif', 'pnm/rgb.ppm', 'jpeg/normal.jpg']:
    data = open(os.path.join(root, name), 'rb').read()
    cut = 'errors/truncated_' + name.replace('/', '_')
    open(os.path.join(root, cut), 'wb').write(data[:len(data) // 2])

store = os.path.join(outside, 'store')
os.makedirs(store)
rgb(120, 90).save(os.path.join(store, '1.jpg'))
rgb(90, 120).save(os.path.join(store, '2.png'))
os.symlink(store, os.path.join(root, 'linked_class'))
files = os.path.join(outside, 'files')
os.makedirs(files)
os.makedirs(os.path.join(root, 'links'))
for name in ['a.jpg', 'b.png', 'c.webp']:
    rgb(70, 50).save(os.path.join(files, name))
    os.symlink(os.path.join(files, name), os.path.join(root, 'links', name))
)";

// argv: ROOT OURS.txt OURS.bin. OURS.txt: the classes on one line, then per sample "path label
// ok|error". Prints "classes ..." and per torchvision sample "path label error" or
// "path label ok MEAN P99 MAX" (grey levels against OURS.bin, in feedscope's sample order).
constexpr const char* kCompare = R"(
import sys
import numpy as np
from PIL import Image
from torchvision import datasets, transforms
root, listing, samples = sys.argv[1:4]
ds = datasets.ImageFolder(root)
print('classes', ' '.join(ds.classes), flush=True)
assert [ds.class_to_idx[c] for c in ds.classes] == list(range(len(ds.classes)))
evaluate = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor(),
                               transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
ours = np.fromfile(samples, dtype=np.float32).reshape(-1, 3, 224, 224)
std = np.array([0.229, 0.224, 0.225]).reshape(3, 1, 1)
for k, (path, label) in enumerate(ds.samples):
    try:
        ref = evaluate(ds.loader(path)).numpy()
    except Exception:
        print(path, label, 'error')
        continue
    if k >= len(ours):
        print(path, label, 'ok nan nan nan')
        continue
    d = np.abs(ref - ours[k]) * std * 255
    print(path, label, 'ok', d.mean(), np.percentile(d, 99), d.max())
)";


std::vector<std::uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<std::uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(ImageFolderParityTest, ListingLabelsAndPixelsMatchTorchvisionOnTraps) {
  const std::string python = testing::reference_python();
  if (!fs::exists(python)) GTEST_SKIP() << "no " << python;
  testing::TempDir dir;
  const fs::path root = dir.path() / "root", outside = dir.path() / "outside";
  fs::create_directories(root);
  fs::create_directories(outside);
  const auto made = testing::run_process({python, "-c", kMake, root, outside});
  if (made.exit_code == 77) GTEST_SKIP() << "PIL, numpy or torchvision missing for " << python;
  ASSERT_EQ(made.exit_code, 0) << made.err;
  // The one trap PIL cannot write.
  JpegEncodeOptions arithmetic;
  arithmetic.arithmetic = true;
  const auto pixels = synthetic_photo(203, 157, 0, 1, 1, 3);
  const auto arith = encode_jpeg(pixels, 203, 157, arithmetic);
  std::ofstream(root / "jpeg/arithmetic.jpg", std::ios::binary)
      .write(reinterpret_cast<const char*>(arith.data()), static_cast<std::streamsize>(arith.size()));

  ImageFolderDataset::Options o;
  o.root = root;
  o.train = false;
  const ImageFolderDataset d(o);
  std::ofstream listing(dir.path() / "ours.txt"), bin(dir.path() / "ours.bin", std::ios::binary);
  std::vector<float> out(3 * 224 * 224);
  std::vector<std::string> ours;
  std::vector<bool> jpeg;
  for (std::size_t i = 0; i < d.size(); ++i) {
    std::string status = "ok";
    LoadContext ctx;
    try {
      d.load(i, std::as_writable_bytes(std::span(out)), ctx);
    } catch (const SampleError& e) {
      status = "error";
      EXPECT_NE(std::string(e.what()).find(d.path(i)), std::string::npos) << e.what();
      std::fill(out.begin(), out.end(), 0.0f);
    }
    bin.write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size() * 4));
    ours.push_back(d.path(i) + " " + std::to_string(d.label(i)) + " " + status);
    jpeg.push_back(sniff_image_format(read_bytes(d.path(i))) == ImageFormat::jpeg);
  }
  bin.close();
  listing.close();

  const auto r = testing::run_process({python, "-c", kCompare, root, dir.path() / "ours.txt", dir.path() / "ours.bin"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  ASSERT_TRUE(std::getline(lines, line));
  std::string classes = "classes";
  for (const std::string& c : d.classes()) classes += " " + c;
  EXPECT_EQ(line, classes);
  std::size_t k = 0;
  for (; std::getline(lines, line); ++k) {
    std::istringstream fields(line);
    std::string path, label, status;
    double mean = 0, p99 = 0, max = 0;
    fields >> path >> label >> status >> mean >> p99 >> max;
    ASSERT_LT(k, ours.size()) << "torchvision lists more: " << line;
    EXPECT_EQ(ours[k], path + " " + label + " " + status);
    if (status != "ok") continue;
    if (jpeg[k]) {
      EXPECT_LE(mean, 1.0) << line;
      EXPECT_LE(p99, 4.0) << line;
    } else {
      // Decoded whole, as PIL does: only PIL's rounding to 8 bits after each resize pass differs.
      EXPECT_LT(mean, 0.4) << line;
      EXPECT_LE(max, 1.01) << line;
    }
  }
  EXPECT_EQ(k, ours.size()) << "feedscope lists more samples than torchvision";
  EXPECT_GE(k, 52u) << r.out;
}

}  // namespace
}  // namespace feedscope
