"""The Python client as a platform wheel, offline as CI is (no package index): an sdist of a copy
of the repository, the wheel built from that sdist (CMake compiling its library) and from the clone
(reusing the suite's build), each checked for its library and tag, installed into a fresh venv
(--system-site-packages only for torch, setuptools and wheel) and run there from another folder;
and an sdist build without its tools says which are missing."""

import email.parser
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest
import zipfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from support import BUILD, JOBS, SOURCE, run

PYTHON = os.environ.get("FEEDSCOPE_TEST_PYTHON", "/usr/bin/python3")
VERSION = (SOURCE / "VERSION").read_text().strip()


def tracked_files():
    r = run(["git", "-C", SOURCE, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            check=False)
    return [f for f in r.stdout.split("\0") if f] if r.returncode == 0 else None


def has_module(name):
    return run([PYTHON, "-c", f"import {name}"], check=False).returncode == 0


@unittest.skipUnless(has_module("build") and has_module("wheel") and has_module("setuptools"),
                     "needs python3-build, python3-wheel and python3-setuptools (scripts/setup.sh)")
@unittest.skipIf(tracked_files() is None, "not a git checkout: no tracked files to copy")
class WheelTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory()
        cls.root = pathlib.Path(cls._tmp.name)
        # A copy of the repository's own files, so that the builds write nothing into it.
        cls.clone = cls.root / "clone"
        for f in tracked_files():
            (cls.clone / f).parent.mkdir(parents=True, exist_ok=True)
            if (SOURCE / f).is_file():
                shutil.copy2(SOURCE / f, cls.clone / f)
        # Unoptimized: the wheel's library compiled in a third of a Release build's time here.
        env = {k: v for k, v in os.environ.items() if k != "FEEDSCOPE_BUILD_DIR"}
        env.update(CMAKE_BUILD_PARALLEL_LEVEL=JOBS, FEEDSCOPE_CMAKE_ARGS="-DCMAKE_BUILD_TYPE=")
        run([PYTHON, "-m", "build", "--sdist", "--no-isolation", "--outdir", cls.root / "dist", cls.clone],
            env=env)
        cls.sdist = cls.root / "dist" / f"feedscope-{VERSION}.tar.gz"
        cls.wheels = {}
        for origin, path, extra in (("sdist", cls.sdist, {}),
                                    ("clone", cls.clone, {"FEEDSCOPE_BUILD_DIR": str(BUILD)})):
            out = cls.root / f"wheel-{origin}"
            run([PYTHON, "-m", "pip", "wheel", "-q", "--no-deps", "--no-index", "--no-build-isolation",
                 "-w", out, path], env={**env, **extra})
            cls.wheels[origin] = next(out.glob("*.whl"))

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def test_each_wheel_is_a_platform_wheel_holding_its_library(self):
        for origin, wheel in self.wheels.items():
            with self.subTest(origin):
                self.assertEqual(wheel.name, f"feedscope-{VERSION}-py3-none-linux_x86_64.whl")
                with zipfile.ZipFile(wheel) as z:
                    names = z.namelist()
                    self.assertIn("feedscope/libfeedscope.so", names)
                    self.assertIn("feedscope/loader.py", names)
                    info = f"feedscope-{VERSION}.dist-info"
                    wheel_meta = email.parser.Parser().parsestr(z.read(f"{info}/WHEEL").decode())
                    metadata = email.parser.Parser().parsestr(z.read(f"{info}/METADATA").decode())
                self.assertEqual(wheel_meta["Root-Is-Purelib"], "false")
                self.assertEqual(wheel_meta["Tag"], "py3-none-linux_x86_64")
                self.assertEqual(metadata["Version"], VERSION)
                self.assertEqual(metadata["License"], "Apache-2.0")

    def test_the_sdist_wheel_installs_into_a_fresh_venv_and_works_from_anywhere(self):
        venv = self.root / "venv"
        run([PYTHON, "-m", "venv", "--system-site-packages", venv])
        run([venv / "bin" / "pip", "install", "-q", "--no-index", self.wheels["sdist"]])
        work = self.root / "work"
        work.mkdir()
        code = textwrap.dedent(f"""\
            import feedscope
            print(feedscope.__version__, feedscope.library_path())
            with feedscope.Session("report", print=False, sample_hz=0) as fs:
                for i in fs.wrap(range(5)):
                    with fs.step(2):
                        pass
            loader = feedscope.DataLoader("synthetic:3x8x8", batch_size=4, synthetic_samples=10)
            print("samples", sum(x.shape[0] for x, _ in loader))
            """)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FEEDSCOPE_LIBRARY")}
        r = run([venv / "bin" / "python", "-c", code], cwd=work, env=env)
        version, library = r.stdout.split("\n")[0].split()
        self.assertEqual(version, VERSION)
        self.assertTrue(library.startswith(str(venv)), library)
        self.assertIn("samples 10", r.stdout)
        report = json.loads((work / "report" / "report.json").read_text())
        self.assertEqual(report["throughput"]["samples"], 10)

    def test_an_sdist_build_without_its_tools_names_them(self):
        bare = self.root / "bare-bin"
        bare.mkdir()
        os.symlink(PYTHON, bare / "python3")
        env = {k: v for k, v in os.environ.items() if k != "FEEDSCOPE_BUILD_DIR"}
        env["PATH"] = str(bare)
        r = run([bare / "python3", "-m", "pip", "wheel", "--no-deps", "--no-index", "--no-build-isolation",
                 "-w", self.root / "never", self.sdist], check=False, env=env)
        self.assertNotEqual(r.returncode, 0)
        out = r.stdout + r.stderr
        self.assertIn("cmake (Debian: cmake)", out)
        self.assertIn("C++20 compiler", out)

    def test_an_sdist_build_without_a_dev_package_names_the_debian_package(self):
        env = {k: v for k, v in os.environ.items() if k != "FEEDSCOPE_BUILD_DIR"}
        env["FEEDSCOPE_CMAKE_ARGS"] = "-DCMAKE_DISABLE_FIND_PACKAGE_TBB=TRUE"
        r = run([PYTHON, "-m", "pip", "wheel", "--no-deps", "--no-index", "--no-build-isolation",
                 "-w", self.root / "never", self.sdist], check=False, env=env)
        self.assertNotEqual(r.returncode, 0)
        said = re.sub(r"\s+", " ", r.stdout + r.stderr)
        self.assertIn("feedscope needs TBB, which was not found", said)
        self.assertIn("apt-get install libtbb-dev", said)


if __name__ == "__main__":
    unittest.main()
