#!/usr/bin/env bash
# Readies public training programs for bench/corpus.py --cases bench/corpus_public.json: the
# programs are PyTorch's own examples, as a user clones them, at the last commit that runs on
# Debian's torch 1.13 (later ones call torch.accelerator, new in torch 2.6):
#   git clone https://github.com/pytorch/examples && git -C examples checkout 76f0120
#   bash bench/corpus_public_prepare.sh examples
#   python3 bench/corpus.py --cases bench/corpus_public.json --public examples
# Their data is made here, offline, in the layouts they read: wikitext-2's train.txt (the clone has
# valid.txt and test.txt; train.txt is stored out of git), MNIST's raw idx files (random digits:
# the speed is the same) for mnist/, vae/, siamese_network/, mnist_hogwild/ and
# mnist_forward_forward/, and BSDS300-shaped JPEGs for super_resolution/.
#
# Programs beyond pytorch/examples (each --program NAME=DIR of bench/corpus.py), readied where named:
#   git clone https://github.com/karpathy/nanoGPT && git clone https://github.com/karpathy/minGPT
#   bash bench/corpus_public_prepare.sh examples nanogpt=nanoGPT mingpt=minGPT
#   python3 bench/corpus.py --cases bench/corpus_public.json --public examples \
#       --program nanogpt=nanoGPT --program mingpt=minGPT
# Both train on a character corpus: tiny-shakespeare's 1.1 MB is downloaded by nanoGPT's prepare.py
# where it is missing, so it is made here from the machine's license texts instead (the speed of a
# character model does not depend on which characters).
set -euo pipefail
usage="usage: corpus_public_prepare.sh PYTORCH_EXAMPLES_DIR [nanogpt=DIR] [mingpt=DIR]"
examples="$(cd "${1:?$usage}" && pwd)"
shift
python="${PYTHON:-/usr/bin/python3}"

# characters FILE: 1.1 MB of text, as tiny-shakespeare's input.txt is.
characters() {
  [ -s "$1" ] && return
  local licenses=(/usr/share/common-licenses/*)
  while [ "$(stat -c %s "$1" 2>/dev/null || echo 0)" -lt 1100000 ]; do cat "${licenses[@]}" >>"$1"; done
  truncate -s 1100000 "$1"
}

for program in "$@"; do
  name="${program%%=*}" dir="${program#*=}"
  [ -d "$dir" ] || { echo "corpus_public_prepare: $program: no folder $dir" >&2; exit 2; }
  case "$name" in
    nanogpt)  # data/shakespeare_char/{train,val}.bin and meta.pkl, by its own prepare.py
      characters "$dir/data/shakespeare_char/input.txt"
      (cd "$dir/data/shakespeare_char" && "$python" prepare.py >/dev/null) ;;
    mingpt)  # projects/chargpt reads input.txt from where it runs
      characters "$dir/input.txt" ;;
    *) echo "corpus_public_prepare: unknown program '$name'; known: nanogpt, mingpt" >&2; exit 2 ;;
  esac
  echo "ready: $name ($dir)"
done

wiki="$examples/word_language_model/data/wikitext-2"
if [ ! -s "$wiki/train.txt" ]; then
  cp "$wiki/valid.txt" "$wiki/train.txt"  # an epoch of some 300 batches
fi

"$python" - "$examples/data/MNIST/raw" <<'PY'
import os, struct, sys
import numpy as np
raw = sys.argv[1]
os.makedirs(raw, exist_ok=True)
rng = np.random.default_rng(0)
for prefix, n in (("train", 6000), ("t10k", 1000)):
    images = os.path.join(raw, f"{prefix}-images-idx3-ubyte")
    if not os.path.exists(images):
        with open(images, "wb") as f:
            f.write(struct.pack(">IIII", 2051, n, 28, 28))
            f.write(rng.integers(0, 256, (n, 28, 28), dtype=np.uint8).tobytes())
        with open(os.path.join(raw, f"{prefix}-labels-idx1-ubyte"), "wb") as f:
            f.write(struct.pack(">II", 2049, n))
            f.write(rng.integers(0, 10, n, dtype=np.uint8).tobytes())
PY

# mnist_forward_forward reads MNIST from ./data where it runs; siamese_network and mnist_hogwild
# from ../data, as mnist does.
[ -e "$examples/mnist_forward_forward/data" ] || ln -s ../data "$examples/mnist_forward_forward/data"

# super_resolution downloads BSDS300 into dataset/ where it is missing: 200 train and 100 test
# JPEGs of BSDS300's 481x321, smooth noise (the speed does not depend on the picture).
"$python" - "$examples/super_resolution/dataset/BSDS300/images" <<'PY'
import os, sys
import numpy as np
from PIL import Image
root = sys.argv[1]
rng = np.random.default_rng(0)
for split, n in (("train", 200), ("test", 100)):
    os.makedirs(os.path.join(root, split), exist_ok=True)
    for i in range(n):
        path = os.path.join(root, split, f"{i}.jpg")
        if not os.path.exists(path):
            small = rng.integers(0, 256, (41, 61, 3), dtype=np.uint8)
            Image.fromarray(small).resize((481, 321), Image.BILINEAR).save(path, quality=90)
PY

mkdir -p "$examples/vae/results"  # vae/main.py saves its samples there
echo "ready: $examples"
