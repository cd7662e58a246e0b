"""What the packaging tests share: the source and build folders under test, commands that fail
with their output, and a run with the source and build folders hidden, as on a machine that never
had them."""

import os
import pathlib
import re
import shutil
import subprocess
import unittest

SOURCE = pathlib.Path(os.environ.get("FEEDSCOPE_TEST_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
BUILD = pathlib.Path(os.environ.get("FEEDSCOPE_TEST_BUILD_DIR", SOURCE / "build"))
# One core each: these tests build beside the rest of the suite (ctest -j2).
JOBS = os.environ.get("FEEDSCOPE_INSTALL_TEST_JOBS", "1")


def run(cmd, check=True, **kwargs):
    """Runs cmd (a list), its output captured; a failure shows the command and its output."""
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kwargs)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    return r


def can_hide_folders():
    """Whether `unshare --mount` works here (root, or a user namespace allowed)."""
    return shutil.which("unshare") is not None and run(
        ["unshare", "--mount", "true"], check=False).returncode == 0


def run_without_source(cmd, check=True, **kwargs):
    """Runs cmd in a mount namespace where the source folder (and the build folder, wherever it
    is) are empty tmpfs mounts: what it needs of them it cannot reach."""
    hide = [SOURCE] + ([BUILD] if SOURCE not in BUILD.parents and BUILD != SOURCE else [])
    mounts = " && ".join(f"mount -t tmpfs none '{p}'" for p in hide)
    script = f"{mounts} && exec \"$@\""
    return run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", *cmd],
               check=check, **kwargs)


def needs(*programs):
    """A skip naming the programs this machine lacks (scripts/setup.sh installs them)."""
    missing = [p for p in programs if shutil.which(p) is None]
    return unittest.skipIf(missing, f"not installed: {', '.join(missing)} (scripts/setup.sh installs them)")


def install(prefix):
    """`cmake --install` of the suite's own build into prefix."""
    run(["cmake", "--install", BUILD, "--prefix", prefix])


def files_naming(root, needles):
    """Files under root whose bytes contain one of needles (the build machine's paths)."""
    found = []
    for path in pathlib.Path(root).rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            found += [f"{path.relative_to(root)} names {n}" for n in needles if n.encode() in data]
    return found


def cache_of(build):
    """A build folder's CMake cache, name to value."""
    text = (pathlib.Path(build) / "CMakeCache.txt").read_text()
    return dict(re.findall(r"^([A-Za-z_][\w-]*):[A-Z]+=(.*)$", text, re.M))


def build_consumer(root, *cmake_args):
    """examples/consumer copied under root (out of the source tree, as a user's project is),
    configured with cmake_args and the libtorch the suite was built with, and built; returns its
    build folder and what the configure printed."""
    source = pathlib.Path(root) / "consumer"
    build = pathlib.Path(root) / "consumer-build"
    shutil.copytree(SOURCE / "examples" / "consumer", source)
    configure = ["cmake", "-S", source, "-B", build, "-G", "Ninja", *cmake_args]
    torch_dir = cache_of(BUILD).get("Torch_DIR")
    if torch_dir:
        configure.append(f"-DTorch_DIR={torch_dir}")
    configured = run(configure)
    run(["cmake", "--build", build, "-j", JOBS])
    return build, configured
