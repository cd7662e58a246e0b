"""Packs the pure-Python feedscope package with the libfeedscope.so that the CMake build made
(build/python/feedscope/ beside this folder, or $FEEDSCOPE_LIBRARY). Nothing is compiled here."""

import os
import re
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def version():
    with open(os.path.join(HERE, "..", "CMakeLists.txt"), encoding="utf-8") as f:
        return re.search(r"project\(feedscope VERSION ([0-9.]+)", f.read()).group(1)


def built_library():
    path = os.environ.get("FEEDSCOPE_LIBRARY") or os.path.join(
        HERE, "..", os.environ.get("BUILD_DIR", "build"), "python", "feedscope", "libfeedscope.so")
    if not os.path.isfile(path):
        raise SystemExit(f"feedscope: {os.path.normpath(path)} does not exist: build feedscope "
                         "first (./scripts/build.sh), or point FEEDSCOPE_LIBRARY at the library")
    return path


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        target = os.path.join(self.build_lib, "feedscope", "libfeedscope.so")
        shutil.copyfile(built_library(), target)
        os.chmod(target, 0o755)


setup(version=version(), packages=["feedscope"], cmdclass={"build_py": BuildWithLibrary})
