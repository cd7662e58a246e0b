#pragma once
// A change made inside a Python program from outside it: a sitecustomize.py that `watch --try`
// puts first on the program's PYTHONPATH for the tried runs, where its command line has no flag for
// the change (DataLoader's persistent_workers). The sitecustomize it shadows (a distribution's, a
// virtualenv's) still runs, after it.
#include <filesystem>
#include <string>

namespace feedscope {

// Makes every torch.utils.data.DataLoader with workers persistent (persistent_workers=True) unless
// the program says otherwise: the DataLoader's module is patched as it is imported.
const std::string& persistent_workers_sitecustomize();

// Writes `source` as `dir`/sitecustomize.py (creating `dir`) and returns `pythonpath` with `dir`
// first. Throws std::runtime_error naming the file where it cannot be written.
std::string install_python_hook(const std::filesystem::path& dir, const std::string& source,
                                const std::string& pythonpath);

}  // namespace feedscope
