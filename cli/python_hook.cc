#include "cli/python_hook.h"

#include <fstream>
#include <stdexcept>
#include <system_error>

namespace feedscope {

const std::string& persistent_workers_sitecustomize() {
  static const std::string source = R"PY(# feedscope watch --try: DataLoader(..., persistent_workers=True) where the program's command line
# has no flag for it. feedscope puts this first on PYTHONPATH for the tried runs only; the
# sitecustomize it shadows runs after it.
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _persistent(init):
    signature = inspect.signature(init)

    def __init__(self, *args, **kwargs):
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError:
            return init(self, *args, **kwargs)
        workers = bound.arguments.get("num_workers", 0)
        if "persistent_workers" not in bound.arguments and isinstance(workers, int) and workers > 0:
            kwargs["persistent_workers"] = True
        return init(self, *args, **kwargs)

    return __init__


class _PersistentDataLoader(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "torch.utils.data.dataloader":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            module.DataLoader.__init__ = _persistent(module.DataLoader.__init__)

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _PersistentDataLoader())


def _shadowed():
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


_shadowed()
)PY";
  return source;
}

std::string install_python_hook(const std::filesystem::path& dir, const std::string& source,
                                const std::string& pythonpath) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::filesystem::path file = dir / "sitecustomize.py";
  std::ofstream out(file, std::ios::trunc);
  out << source;
  out.close();
  if (ec || !out) throw std::runtime_error("cannot write " + file.string());
  return pythonpath.empty() ? dir.string() : dir.string() + ":" + pythonpath;
}

}  // namespace feedscope
