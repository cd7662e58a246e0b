"""`cmake --install` into a prefix that then moves: the CLI and its injection library, the CMake
package and the pkg-config file, the Python package; a libtorch project of its own
(examples/consumer) built against it with find_package and run where the source and build folders
are gone (hidden by empty mounts)."""

import json
import os
import pathlib
import re
import shutil
import sys
import tempfile
import textwrap
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from support import (BUILD, SOURCE, build_consumer, cache_of, can_hide_folders, files_naming,
                     install, needs, run, run_without_source)

PYTHON = os.environ.get("FEEDSCOPE_TEST_PYTHON", "/usr/bin/python3")


def with_cuda():
    return cache_of(BUILD).get("FEEDSCOPE_WITH_CUDA") == "ON"


@needs("cmake", "ninja", "pkg-config")
@unittest.skipUnless(can_hide_folders(), "needs `unshare --mount` (root) to hide the source folder")
class InstalledTreeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory()
        root = pathlib.Path(cls._tmp.name)
        stage = root / "stage"
        install(stage)
        cls.naming = files_naming(stage, [str(SOURCE), str(BUILD)])
        # Relocatable: every test below uses the tree where it was not installed.
        cls.prefix = root / "moved" / "prefix"
        cls.prefix.parent.mkdir()
        stage.rename(cls.prefix)
        cls.pythonpath = cls.prefix / "lib" / "python3" / "dist-packages"
        cls.consumer, _ = build_consumer(root, "-DCMAKE_BUILD_TYPE=Release",
                                         f"-DCMAKE_PREFIX_PATH={cls.prefix}")
        cls.work = root / "work"  # the current folder of the runs: not the source
        cls.work.mkdir()

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def report(self, directory):
        return json.loads((self.work / directory / "report.json").read_text())

    def test_no_installed_file_names_the_source_or_the_build_folder(self):
        self.assertEqual(self.naming, [])

    def test_the_tree_has_each_part_where_the_docs_say(self):
        expected = ["bin/feedscope", "include/feedscope/session.h", "include/feedscope/loader.h",
                    "include/feedscope/loop.h", "include/feedscope/feedscope_c.h",
                    "include/feedscope/version.h", "lib/cmake/feedscope/feedscopeConfig.cmake",
                    "lib/cmake/feedscope/feedscopeConfigVersion.cmake", "lib/pkgconfig/feedscope.pc",
                    "lib/libfeedscope.so", "lib/libfeedscope_loader.so",
                    "lib/python3/dist-packages/feedscope/__init__.py",
                    "lib/python3/dist-packages/feedscope/libfeedscope.so",
                    "share/feedscope/grafana/feedscope-dashboard.json",
                    "share/feedscope/prometheus/prometheus.yml", "share/doc/feedscope/LICENSE"]
        if with_cuda():
            expected.append("lib/feedscope/libfeedscope_inject.so")
        self.assertEqual([p for p in expected if not (self.prefix / p).exists()], [])

    def test_a_libtorch_project_links_it_and_runs_without_the_source(self):
        for mode, extra in (("torch-loader", []), ("feedscope-loader", ["--feedscope-loader"])):
            with self.subTest(mode):
                r = run_without_source([self.consumer / "train", mode, *extra], cwd=self.work)
                self.assertIn("consumer: final loss", r.stdout, r.stderr)
                report = self.report(mode)
                self.assertIn(report["diagnosis"]["bottleneck"],
                              ["cpu_compute", "cpu_preprocess", "storage_io"])
                self.assertTrue(report["diagnosis"]["verdict"])
                self.assertEqual(report["throughput"]["steps"], 2 * (1024 // 32) - 2)  # 2 epochs, warm-up 2
                if extra:  # feedscope's loader tells the session what its workers did
                    self.assertGreater(report["stages"]["collate"]["busy_s"], 0)

    def test_the_cli_and_the_python_client_run_from_anywhere_without_the_source(self):
        r = run_without_source([self.prefix / "bin" / "feedscope", "demo", "--help"], cwd=self.work)
        self.assertIn("embedded defaults", r.stdout)
        env = {**os.environ, "PYTHONPATH": str(self.pythonpath)}
        env.pop("FEEDSCOPE_LIBRARY", None)
        code = "import feedscope; print(feedscope.__version__, feedscope.library_path())"
        r = run_without_source([PYTHON, "-c", code], cwd=self.work, env=env)
        version = (SOURCE / "VERSION").read_text().strip()
        self.assertEqual(r.stdout.split(), [version, str(self.pythonpath / "feedscope" / "libfeedscope.so")])
        # watch finds its injection library by itself: where there is none, the report says so.
        r = run_without_source([self.prefix / "bin" / "feedscope", "watch", "--report-dir", "w",
                                "--", PYTHON, "-c", "print('step 1')"], cwd=self.work, env=env)
        unavailable = self.report("w")["gpu_trace"].get("unavailable", "")
        self.assertNotIn("injection library is missing", unavailable)

    @unittest.skipUnless(with_cuda(), "a build without CUDA has no injection library")
    def test_watch_without_its_injection_library_names_the_file_and_still_diagnoses(self):
        broken = self.work.parent / "no-inject"
        shutil.copytree(self.prefix, broken, symlinks=True)
        (broken / "lib" / "feedscope" / "libfeedscope_inject.so").unlink()
        r = run_without_source([broken / "bin" / "feedscope", "watch", "--report-dir", "w-broken",
                                "--", PYTHON, "-c", "print('step 1')"], cwd=self.work)
        report = self.report("w-broken")
        self.assertIn(f"{broken}/lib/feedscope/libfeedscope_inject.so",
                      report["gpu_trace"]["unavailable"], r.stderr)
        self.assertTrue(report["diagnosis"]["verdict"])

    def test_pkg_config_compiles_a_loop_with_the_public_header_alone(self):
        program = self.work / "pc.cc"
        program.write_text(textwrap.dedent("""\
            #include <feedscope/session.h>
            #include <vector>
            int main() {
              feedscope::Session fs({.report_dir = "pc-report", .print = false});
              for (int x : fs.wrap(std::vector<int>{1, 2, 3, 4})) {
                auto step = fs.step(x);
              }
              return fs.finish().bottleneck.empty() ? 1 : 0;
            }
            """))
        env = {**os.environ, "PKG_CONFIG_PATH": str(self.prefix / "lib" / "pkgconfig")}
        flags = run(["pkg-config", "--cflags", "--libs", "feedscope"], env=env).stdout.split()
        include = [os.path.normpath(f[2:]) for f in flags if f.startswith("-I")]
        self.assertEqual(include, [str(self.prefix / "include")])  # found from where the .pc lies
        run(["g++", program, "-o", self.work / "pc", *flags], cwd=self.work)
        env["LD_LIBRARY_PATH"] = str(self.prefix / "lib")
        run_without_source([self.work / "pc"], cwd=self.work, env=env)
        self.assertEqual(self.report("pc-report")["throughput"]["samples"], 10)

    def configure_user_project(self, name, cmake_lists):
        project = self.work / name
        project.mkdir()
        (project / "CMakeLists.txt").write_text(textwrap.dedent(cmake_lists))
        (project / "main.cc").write_text("int main() { return 0; }\n")
        return run(["cmake", "-S", project, "-B", project / "build",
                    f"-DCMAKE_PREFIX_PATH={self.prefix}"], check=False)

    def test_another_major_version_is_refused_naming_the_version_found(self):
        r = self.configure_user_project("v2", """\
            cmake_minimum_required(VERSION 3.25)
            project(v2 CXX)
            find_package(feedscope 2.0 REQUIRED)
            """)
        self.assertNotEqual(r.returncode, 0)
        version = (SOURCE / "VERSION").read_text().strip()
        self.assertIn(f"version: {version}", re.sub(r"\s+", " ", r.stderr))

    def test_the_loader_without_torch_says_to_find_torch_first(self):
        r = self.configure_user_project("no-torch", """\
            cmake_minimum_required(VERSION 3.25)
            project(no_torch CXX)
            find_package(feedscope REQUIRED)
            add_executable(app main.cc)
            target_link_libraries(app PRIVATE feedscope::loader)
            """)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("loader_needs_libtorch__call_find_package_Torch_before_find_package_feedscope",
                      r.stderr)
        r = self.configure_user_project("no-torch-component", """\
            cmake_minimum_required(VERSION 3.25)
            project(no_torch CXX)
            find_package(feedscope REQUIRED COMPONENTS loader)
            """)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("find_package(Torch REQUIRED) before find_package(feedscope)",
                      re.sub(r"\s+", " ", r.stderr))


if __name__ == "__main__":
    unittest.main()
