"""The Python client's wheel: the pure-Python package (python/feedscope/) with its native library,
libfeedscope.so (the C ABI over feedscope's torch-free C++ libraries), built here by CMake.

Metadata is in pyproject.toml; this file adds the CMake build step, and marks the wheel as a
platform wheel: it holds a native library (any CPython 3 loads it through ctypes, so the tag is
py3-none-<platform>). FEEDSCOPE_BUILD_DIR=DIR builds in DIR, an existing build of the clone
(./scripts/build.sh's build/) included, instead of a fresh one; FEEDSCOPE_CMAKE_ARGS adds
configure flags to a fresh one.
"""

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

try:
    from wheel.bdist_wheel import bdist_wheel
except ImportError:  # without wheel there is no wheel to tag (pip install builds one with it)
    bdist_wheel = None

HERE = os.path.dirname(os.path.abspath(__file__))
LIBRARY = "libfeedscope.so"
DEBIAN_HINT = ("On Debian or Ubuntu, scripts/setup.sh in the source installs everything feedscope "
               "builds with")


def missing_tools():
    """The build tools that are not on PATH, each with the Debian package that brings it."""
    missing = []
    if shutil.which("cmake") is None:
        missing.append("cmake (Debian: cmake)")
    compiler = os.environ.get("CXX") or "c++"
    if shutil.which(compiler) is None and shutil.which("g++") is None:
        missing.append(f"a C++20 compiler ({compiler}; Debian: g++ or build-essential)")
    return missing


def run(command, what):
    print("feedscope:", " ".join(command), flush=True)
    if shutil.which(command[0]) is None:
        raise SystemExit(f"feedscope: {what} needs {command[0]}, which is not on PATH. {DEBIAN_HINT}.")
    r = subprocess.run(command, cwd=HERE)
    if r.returncode != 0:
        raise SystemExit(f"feedscope: {what} failed (exit {r.returncode}); the messages above name "
                         f"what is missing. {DEBIAN_HINT}.")


def build_library(build_temp):
    """Configures (once) and builds libfeedscope.so; returns its path."""
    build_dir = os.environ.get("FEEDSCOPE_BUILD_DIR") or os.path.join(build_temp, "feedscope-cmake")
    build_dir = os.path.abspath(build_dir)
    if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
        missing = missing_tools()
        if missing:
            raise SystemExit("feedscope: building the wheel needs " + ", ".join(missing) +
                             f", which were not found. {DEBIAN_HINT}.")
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        run(["cmake", "-S", HERE, "-B", build_dir, *generator, "-DCMAKE_BUILD_TYPE=Release",
             "-DFEEDSCOPE_WITH_TORCH=OFF", "-DFEEDSCOPE_BUILD_PYTHON=ON", "-DFEEDSCOPE_INSTALL=OFF",
             "-DFEEDSCOPE_WERROR=OFF", "-DFEEDSCOPE_UNITY_BUILD=ON",
             *shlex.split(os.environ.get("FEEDSCOPE_CMAKE_ARGS", ""))], "configuring feedscope")
    jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
    run(["cmake", "--build", build_dir, "--target", "feedscope_c", "--parallel", jobs],
        "building libfeedscope.so")
    return os.path.join(build_dir, "python", "feedscope", LIBRARY)


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        library = build_library(self.get_finalized_command("build").build_temp)
        target = os.path.join(self.build_lib, "feedscope", LIBRARY)
        shutil.copyfile(library, target)
        os.chmod(target, 0o755)


class BinaryDistribution(Distribution):
    def has_ext_modules(self):  # a native library inside: not a pure wheel
        return True


commands = {"build_py": BuildWithLibrary}
if bdist_wheel is not None:
    class PlatformWheel(bdist_wheel):
        def get_tag(self):
            # ctypes, not the CPython C API: one wheel for every Python 3 of this platform.
            return "py3", "none", sysconfig.get_platform().replace("-", "_").replace(".", "_")

    commands["bdist_wheel"] = PlatformWheel

if sys.platform != "linux":
    raise SystemExit("feedscope: the Python client builds on Linux only (it reads /proc)")

# Not build/: that is the CMake build of the clone (./scripts/build.sh).
setup(cmdclass=commands, distclass=BinaryDistribution, options={"build": {"build_base": "build-wheel"}})
