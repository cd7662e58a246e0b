"""`cpack -G DEB` of the suite's build: the package's name, its Depends from the libraries it
links (dpkg-shlibdeps), its files (the CLI, the injection library, the CMake package, the Python
package) with no path of the build machine; then installed with apt and removed again, which
leaves none of its files behind (as root, the machine's own dpkg: FEEDSCOPE_TEST_DEB_INSTALL=0
leaves that part out)."""

import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from support import BUILD, SOURCE, files_naming, needs, run

VERSION = (SOURCE / "VERSION").read_text().strip()


def with_cuda():
    return "FEEDSCOPE_WITH_CUDA:BOOL=ON" in (BUILD / "CMakeCache.txt").read_text()


def installed(package):
    r = run(["dpkg-query", "-W", "-f=${Status}", package], check=False)
    return "install ok installed" in r.stdout


@needs("cpack", "dpkg-deb", "dpkg-shlibdeps")
class DebianPackageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory()
        cls.out = pathlib.Path(cls._tmp.name)
        run(["cpack", "-G", "DEB", "--config", BUILD / "CPackConfig.cmake", "-B", cls.out])
        arch = run(["dpkg", "--print-architecture"]).stdout.strip()
        cls.deb = cls.out / f"feedscope_{VERSION}_{arch}.deb"
        cls.files = run(["dpkg-deb", "--contents", cls.deb]).stdout
        cls.root = cls.out / "root"
        run(["dpkg-deb", "-x", cls.deb, cls.root])

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def test_its_name_and_depends_come_from_what_it_links(self):
        self.assertTrue(self.deb.exists(), sorted(p.name for p in self.out.iterdir()))
        info = run(["dpkg-deb", "--field", self.deb, "Package", "Version", "Depends"]).stdout
        self.assertIn("Package: feedscope", info)
        self.assertIn(f"Version: {VERSION}", info)
        depends = re.search(r"^Depends: (.*)$", info, re.M).group(1)
        # The C++ runtime and libtorch, found by dpkg-shlibdeps in the binaries, and python3.
        for package in ("libc6", "libstdc++6", "python3"):
            self.assertRegex(depends, rf"\b{re.escape(package)}\b")
        self.assertRegex(depends, r"\blibtorch")

    def test_it_holds_the_cli_the_libraries_the_cmake_package_and_the_python_package(self):
        expected = ["./usr/bin/feedscope", "./usr/lib/libfeedscope.so.", "./usr/include/feedscope/session.h",
                    "./usr/lib/cmake/feedscope/feedscopeConfig.cmake",
                    "./usr/lib/pkgconfig/feedscope.pc",
                    "./usr/lib/python3/dist-packages/feedscope/__init__.py",
                    "./usr/lib/python3/dist-packages/feedscope/libfeedscope.so",
                    "./usr/share/feedscope/grafana/feedscope-dashboard.json"]
        if with_cuda():
            expected.append("./usr/lib/feedscope/libfeedscope_inject.so")
        self.assertEqual([f for f in expected if f not in self.files], [])

    def test_no_file_names_the_source_or_the_build_folder(self):
        self.assertEqual(files_naming(self.root, [str(SOURCE), str(BUILD)]), [])

    def test_its_prerm_removes_the_bytecode_python_leaves(self):
        control = self.out / "control"
        run(["dpkg-deb", "-e", self.deb, control])
        prerm = control / "prerm"
        self.assertTrue(os.access(prerm, os.X_OK))
        self.assertIn("/usr/lib/python3/dist-packages/feedscope/__pycache__", prerm.read_text())

    @unittest.skipIf(os.environ.get("FEEDSCOPE_TEST_DEB_INSTALL") == "0", "FEEDSCOPE_TEST_DEB_INSTALL=0")
    @unittest.skipUnless(os.geteuid() == 0 and shutil.which("apt-get"), "apt-get as root")
    def test_apt_installs_it_and_removes_every_file_again(self):
        if installed("feedscope"):
            self.skipTest("feedscope is installed on this machine already: not touched")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        try:
            # Offline: every dependency is installed already (scripts/setup.sh).
            run(["apt-get", "install", "-y", "-q", str(self.deb)], env=env)
            listed = run(["dpkg", "-L", "feedscope"]).stdout.split("\n")
            clean = {k: v for k, v in os.environ.items()
                     if k not in ("PYTHONPATH", "FEEDSCOPE_LIBRARY", "PYTHONDONTWRITEBYTECODE")}
            self.assertEqual(shutil.which("feedscope", path="/usr/bin"), "/usr/bin/feedscope")
            r = run(["feedscope", "--version"], env=clean, cwd="/")
            self.assertIn(VERSION, r.stdout)
            r = run(["/usr/bin/python3", "-c", "import feedscope; print(feedscope.__version__)"],
                    env=clean, cwd="/")
            self.assertEqual(r.stdout.strip(), VERSION)
        finally:
            run(["apt-get", "remove", "-y", "-q", "feedscope"], env=env, check=False)
            self.addCleanup(run, ["dpkg", "--purge", "feedscope"], check=False)
        self.assertFalse(installed("feedscope"))
        left = [f for f in listed if f.startswith("/usr/") and os.path.isfile(f)]
        self.assertEqual(left, [])
        self.assertFalse(pathlib.Path("/usr/lib/python3/dist-packages/feedscope").exists())
        # dpkg keeps a removed package's record (its postrm runs ldconfig) until it is purged: the
        # machine goes back to as it was.
        run(["dpkg", "--purge", "feedscope"], check=False)


if __name__ == "__main__":
    unittest.main()
