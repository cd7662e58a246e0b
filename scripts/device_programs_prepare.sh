#!/usr/bin/env bash
# Runs HERE: copies the public GPU training programs that scripts/device_check.sh runs unchanged
# under `feedscope watch` on a lent GPU machine (which reaches no network) into .device-programs/,
# an ignored folder the device call carries (`carry: [".device-debs", ".device-programs"]`).
# Only the files the programs read travel; their data is made on the machine from a seed.
#
#   git clone https://github.com/pytorch/examples && git clone https://github.com/karpathy/nanoGPT
#   bash scripts/device_programs_prepare.sh examples nanoGPT
#
# What travels, as users run them (the device has torch 2.11, so each at its newest commit):
#   imagenet/main.py                  pytorch/examples: ResNet on an ImageFolder, or --dummy
#   nanogpt/{train,model,configurator}.py, nanogpt/config/train_shakespeare_char.py
#                                     karpathy/nanoGPT: a small GPT, --compile=True
# MANIFEST records each one's commit.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
usage="usage: device_programs_prepare.sh PYTORCH_EXAMPLES_DIR NANOGPT_DIR"
examples="$(cd "${1:?$usage}" && pwd)"
nanogpt="$(cd "${2:?$usage}" && pwd)"
out="$root/.device-programs"

need() {  # need DIR FILE...: each FILE must be in the clone DIR
  local dir="$1" f
  shift
  for f in "$@"; do
    [ -f "$dir/$f" ] || { echo "device_programs_prepare: $dir has no $f: is it a clone of the right repository?" >&2; exit 1; }
  done
}
need "$examples" imagenet/main.py
need "$nanogpt" train.py model.py configurator.py config/train_shakespeare_char.py

rm -rf "$out"
mkdir -p "$out/imagenet" "$out/nanogpt/config"
cp "$examples/imagenet/main.py" "$out/imagenet/"
cp "$nanogpt/train.py" "$nanogpt/model.py" "$nanogpt/configurator.py" "$out/nanogpt/"
cp "$nanogpt/config/train_shakespeare_char.py" "$out/nanogpt/config/"
{
  echo "pytorch/examples $(git -C "$examples" rev-parse HEAD 2>/dev/null || echo 'commit unknown')"
  echo "karpathy/nanoGPT $(git -C "$nanogpt" rev-parse HEAD 2>/dev/null || echo 'commit unknown')"
} >"$out/MANIFEST"
cat "$out/MANIFEST"
echo "ready: $out ($(du -sh "$out" | cut -f1))"
