#!/usr/bin/env bash
# Writes the seed corpora of fuzz/corpus/<target>/ (how the checked-in seeds were made). Regression
# inputs (crash-*, review-*) are left as they are. Needs python3 with
# Pillow (Debian: python3-pil), a C compiler with libjpeg, and a built feedscope (FEEDSCOPE, default
# build/cli/feedscope) for the records indexes. The /proc samples are this machine's.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
corpus="$root/fuzz/corpus"
feedscope="${FEEDSCOPE:-$root/build/cli/feedscope}"
python="${PYTHON:-/usr/bin/python3}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# --- JPEG: every colour space, subsampling and coding the decoder meets, a few pixels each -------
out="$corpus/jpeg_fuzz"
"$python" - "$out" <<'PY'
import io, struct, sys
from PIL import Image
out = sys.argv[1]

def picture(mode, w, h):
    im = Image.new("RGB", (w, h))
    im.putdata([((x * 255) // max(w - 1, 1), (y * 255) // max(h - 1, 1), (x * y * 37) & 255)
                for y in range(h) for x in range(w)])
    return im.convert(mode)

def save(name, im, **options):
    buf = io.BytesIO()
    im.save(buf, "JPEG", **options)
    data = buf.getvalue()
    open(f"{out}/{name}", "wb").write(data)
    return data

save("gray.jpg", picture("L", 24, 16), quality=75)
save("ycc420.jpg", picture("RGB", 32, 24), quality=85, subsampling=2)
save("ycc422.jpg", picture("RGB", 32, 24), quality=85, subsampling=1)
save("ycc444.jpg", picture("RGB", 32, 24), quality=85, subsampling=0)
save("progressive420.jpg", picture("RGB", 40, 24), quality=80, progressive=True)
save("progressive_gray.jpg", picture("L", 24, 24), quality=80, progressive=True)
save("optimized_huffman.jpg", picture("RGB", 24, 24), quality=70, optimize=True)
save("cmyk_adobe.jpg", picture("CMYK", 16, 16), quality=80)
save("one_pixel.jpg", picture("RGB", 1, 1), quality=90)
save("odd_17x9.jpg", picture("RGB", 17, 9), quality=90, subsampling=2)
save("tall_3x70.jpg", picture("RGB", 3, 70), quality=60)
save("wide_90x2.jpg", picture("L", 90, 2), quality=60)
save("comment.jpg", picture("RGB", 16, 8), quality=50, comment=b"feedscope fuzz seed")
data = save("padded_after_eoi.jpg", picture("RGB", 16, 16), quality=50)
open(f"{out}/padded_after_eoi.jpg", "wb").write(data + b"\0" * 16)

# Frame headers claiming far more pixels than the data holds: one under the decoder's pixel limit,
# one over it.
def with_size(data, width, height):
    i = 2
    while i < len(data):
        marker, length = data[i + 1], struct.unpack(">H", data[i + 2:i + 4])[0]
        if marker in (0xC0, 0xC1, 0xC2):
            return data[:i + 5] + struct.pack(">HH", height, width) + data[i + 9:]
        i += 2 + length
    raise ValueError("no SOF marker")
small = save("base.jpg", picture("RGB", 16, 16), quality=50)
open(f"{out}/claims_12000x12000.jpg", "wb").write(with_size(small, 12000, 12000))
open(f"{out}/claims_65000x65000.jpg", "wb").write(with_size(small, 65000, 65000))
import os; os.remove(f"{out}/base.jpg")
PY

# Restart markers and arithmetic coding, which Pillow cannot write: libjpeg directly.
cat > "$tmp/encode.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <jpeglib.h>
int main(int argc, char** argv) {
  const int w = 32, h = 24, restart = atoi(argv[2]), arith = atoi(argv[3]);
  FILE* f = fopen(argv[1], "wb");
  struct jpeg_compress_struct c;
  struct jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  jpeg_stdio_dest(&c, f);
  c.image_width = w;
  c.image_height = h;
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 80, TRUE);
  c.restart_interval = restart;
  c.arith_code = arith;
  jpeg_start_compress(&c, TRUE);
  unsigned char row[32 * 3];
  while (c.next_scanline < (unsigned)h) {
    for (int x = 0; x < w; ++x) {
      row[3 * x] = x * 8;
      row[3 * x + 1] = c.next_scanline * 10;
      row[3 * x + 2] = (x * c.next_scanline * 37) & 255;
    }
    JSAMPROW p = row;
    jpeg_write_scanlines(&c, &p, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  return fclose(f) != 0;
}
C
cc -O1 -o "$tmp/encode" "$tmp/encode.c" -ljpeg
"$tmp/encode" "$out/restart_every_mcu.jpg" 1 0
"$tmp/encode" "$out/arithmetic.jpg" 0 1

# --- records index: fixed and variable records, one and several shards ---------------------------
out="$corpus/records_index_fuzz"
make_records() {  # NAME ARGS...
  local name="$1"
  shift
  "$feedscope" make-dataset records --out "$tmp/$name" "$@" >/dev/null
  cp "$tmp/$name/records.index" "$out/$name.index"
}
make_records fixed_one_shard --count 4 --sample-bytes 16
make_records fixed_three_shards --count 6 --sample-bytes 32 --shard-bytes 150
make_records variable_two_shards --count 5 --sample-bytes 64 --shard-bytes 250 --variable

# --- YAML run configs: the demo's, every key, and the shapes the loader must refuse --------------
out="$corpus/config_fuzz"
cp "$root/configs/demo.yaml" "$out/demo.yaml"
cat > "$out/every_key.yaml" <<'YAML'
dataset: synthetic:3x32x32
synthetic_samples: 4096
image_pipeline: eval
image_size: 128
model: mlp
hidden: 256
layers: 3
classes: 10
lr: 0.1
loader_only: off
num_workers: 4
batch_size: 128
prefetch: 2
pin_memory: on
shuffle: true
drop_last: no
cold_cache: false
device: cuda:0
steps: 100
warmup: 5
seed: 7
report_dir: out/report
sample_hz: 20
metrics_addr: "[::1]:9464"
rank: 1
world_size: 2
bad_sample: skip
max_bad_ratio: 0.05
host: node-1
json: on
YAML
cat > "$out/images_duration.yaml" <<'YAML'
dataset: images:/data/imagenet/train
image-pipeline: train
image-size: 224
model: cnn
duration: 30.5
num-workers: 0
metrics_addr: 127.0.0.1:9464
YAML
cat > "$out/records_flow.yaml" <<'YAML'
{dataset: "records:/data/shards", batch_size: 64, steps: 10, device: cpu, cold_cache: yes}
YAML
printf 'steps: 10\nduration: 5\n' > "$out/steps_and_duration.yaml"
printf 'batch_size: [1, 2]\n' > "$out/list_value.yaml"
printf 'batch_sise: 3\n' > "$out/misspelt_key.yaml"
printf -- '- a\n- b\n' > "$out/top_level_list.yaml"
printf 'model: cnn\ndataset: synthetic:784\n' > "$out/cnn_needs_image_shape.yaml"
printf 'rank: 3\nworld_size: 2\n' > "$out/rank_not_below_world.yaml"
printf 'anchors: &a {x: 1}\nhost: *a\n' > "$out/alias_map.yaml"
printf 'lr: .nan\nseed: -1\n' > "$out/bad_numbers.yaml"
: > "$out/empty.yaml"

# --- /proc: the test fixtures and this machine's files --------------------------------------------
out="$corpus/proc_parsers_fuzz"
fixtures="$root/tests/sampler/fixtures"
for kind in basic malformed; do
  cp "$fixtures/$kind/proc/stat" "$out/${kind}_stat"
  cp "$fixtures/$kind/proc/meminfo" "$out/${kind}_meminfo"
  cp "$fixtures/$kind/proc/self/stat" "$out/${kind}_self_stat"
  cp "$fixtures/$kind/proc/self/status" "$out/${kind}_self_status"
done
cat /proc/stat > "$out/stat"
cat /proc/meminfo > "$out/meminfo"
cat /proc/self/status > "$out/self_status"
cat /proc/self/stat > "$out/self_stat"
cat /proc/diskstats > "$out/diskstats"
cat /proc/self/io > "$out/self_io"
if [ -r /proc/pressure/io ]; then
  cat /proc/pressure/io > "$out/pressure_io"
else
  printf 'some avg10=1.50 avg60=0.80 avg300=0.20 total=123456\nfull avg10=0.50 avg60=0.10 avg300=0.00 total=6789\n' > "$out/pressure_io"
fi
# --- shards: tar archives (ustar, GNU and PAX long names, gzip), an Example, a TFRecord file -------
# The first byte picks shards_fuzz's reader: 0 tar, 1 Example, 2 TFRecord. The Example is the one
# Python's protobuf serialized for tests/loader/tfrecord_dataset_test.cc's golden test, shortened.
out="$corpus/shards_fuzz"
"$python" - "$out" <<'PY'
import gzip, io, struct, sys, tarfile
out = sys.argv[1] + "/"

def tar_bytes(fmt, long_name):
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w", format=fmt) as t:
        for name, data in [("k/0.jpg", b"\xff\xd8\xff\xd9"), ("k/0.cls", b"3"),
                           (("d" * 120 + "/x.txt") if long_name else "x.txt", b"hi")]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    data = b.getvalue()
    end = len(data)  # tarfile pads to 10240 bytes; keep the two end blocks only
    while end > 1536 and data[end - 1536:end] == bytes(1536):
        end -= 512
    return data[:end]

open(out + "seed-ustar", "wb").write(b"\0" + tar_bytes(tarfile.USTAR_FORMAT, False))
open(out + "seed-gnu-long", "wb").write(b"\0" + tar_bytes(tarfile.GNU_FORMAT, True))
open(out + "seed-pax-long", "wb").write(b"\0" + tar_bytes(tarfile.PAX_FORMAT, True))
open(out + "seed-gzip", "wb").write(b"\0" + gzip.compress(tar_bytes(tarfile.GNU_FORMAT, True), mtime=0))

def entry(key, feature):
    k = key.encode()
    body = b"\x0a" + bytes([len(k)]) + k + b"\x12" + bytes([len(feature)]) + feature
    return b"\x0a" + bytes([len(body)]) + body

features = (entry("image/class/label", bytes.fromhex("1a040a02a103"))
            + entry("image/encoded", bytes.fromhex("0a080a06ffd8ffd9ffd9"))
            + entry("image/object/bbox/xmin", bytes.fromhex("12060a040000803e")))
example = b"\x0a" + bytes([len(features)]) + features
open(out + "seed-example", "wb").write(b"\x01" + example)

def crc32c(data):
    c = 0xFFFFFFFF
    for x in data:
        c ^= x
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 & -(c & 1))
    return c ^ 0xFFFFFFFF

def masked(data):
    c = crc32c(data)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF

def frame(data):
    head = struct.pack("<Q", len(data))
    return head + struct.pack("<I", masked(head)) + data + struct.pack("<I", masked(data))

open(out + "seed-tfrecord", "wb").write(b"\x02" + frame(example) + frame(example))
PY
echo "seeds written under $corpus"
