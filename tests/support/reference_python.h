#pragma once
// The python3 the torchvision parity tests compare against, and their torchvision side.
#include <cstdlib>
#include <string>

namespace feedscope::testing {

// $FEEDSCOPE_PYTHON where set (a GPU machine's python3 with its own torch), else Debian's.
inline std::string reference_python() {
  const char* chosen = std::getenv("FEEDSCOPE_PYTHON");
  return chosen && *chosen ? chosen : "/usr/bin/python3";
}

// torchvision's side of the parity tests, run with reference_python() -c. argv: samples.bin
// (feedscope's float samples, 3x224x224 each) crops.txt, one line a sample: path top left height
// width flip (-1: eval). Prints "mean p99 max" per sample, in grey levels. Exit 77: torchvision
// missing. A photograph is opened once for its run of crops.
inline constexpr const char* kTorchvisionReference = R"(
import sys
try:
    import numpy as np
    from PIL import Image
    from torchvision import transforms
    import torchvision.transforms.functional as F
except ImportError:
    sys.exit(77)
norm = transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
evaluate = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor(), norm])
ours = np.fromfile(sys.argv[1], dtype=np.float32).reshape(-1, 3, 224, 224)
std = np.array([0.229, 0.224, 0.225]).reshape(3, 1, 1)
cache = {}
for k, line in enumerate(open(sys.argv[2])):
    path, i, j, h, w, flip = line.split()
    if path not in cache:
        cache = {path: Image.open(path).convert('RGB')}
    img = cache[path]
    if int(flip) < 0:
        ref = evaluate(img).numpy()
    else:
        crop = F.resized_crop(img, int(i), int(j), int(h), int(w), [224, 224], transforms.InterpolationMode.BILINEAR)
        ref = norm(F.to_tensor(F.hflip(crop) if int(flip) else crop)).numpy()
    d = np.abs(ref - ours[k]) * std * 255
    print(d.mean(), np.percentile(d, 99), d.max(), flush=True)
)";

}  // namespace feedscope::testing
