"""feedscope built inside another project (FetchContent with SOURCE_DIR, as add_subdirectory):
examples/consumer from a clean folder builds only the libraries it links, keeps its own build
type and flags, finds none of feedscope's test tools, and its loop writes a report."""

import json
import pathlib
import sys
import tempfile
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from support import BUILD, JOBS, SOURCE, build_consumer, cache_of, needs, run


@needs("cmake", "ninja")
class SubprojectTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory()
        root = pathlib.Path(cls._tmp.name)
        # No build type: the parent's is none, and feedscope must keep it so.
        cls.build, _ = build_consumer(root, f"-DFEEDSCOPE_SOURCE={SOURCE}")
        cls.cache = cache_of(cls.build)
        cls.feedscope_build = cls.build / "_deps" / "feedscope-build"

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def test_the_parents_loop_writes_a_report(self):
        work = pathlib.Path(self._tmp.name) / "work"
        work.mkdir(exist_ok=True)
        run([self.build / "train", "report", "--feedscope-loader"], cwd=work)
        report = json.loads((work / "report" / "report.json").read_text())
        self.assertTrue(report["diagnosis"]["verdict"])
        self.assertGreater(report["stages"]["decode"]["busy_s"] + report["stages"]["read"]["busy_s"]
                           + report["stages"]["collate"]["busy_s"], 0)

    def test_it_adds_no_test_and_needs_no_test_tool(self):
        self.assertRegex(run(["ctest", "-N"], cwd=self.build).stdout, r"Total Tests: 0")
        found = [p for p in ("GTest_DIR", "benchmark_DIR", "spdlog_DIR") if p in self.cache]
        self.assertEqual(found, [])
        self.assertEqual(self.cache.get("FEEDSCOPE_BUILD_TESTS"), "OFF")
        self.assertEqual(self.cache.get("FEEDSCOPE_WERROR"), "OFF")

    def test_the_parents_build_type_and_flags_stay_its_own(self):
        self.assertEqual(self.cache.get("CMAKE_BUILD_TYPE"), "")
        self.assertEqual(self.cache.get("CMAKE_CXX_FLAGS_RELWITHDEBINFO"), "-O2 -g -DNDEBUG")
        self.assertIn(self.cache.get("CMAKE_EXPORT_COMPILE_COMMANDS", ""), ("", "OFF"))
        self.assertNotIn("-Werror", (self.build / "build.ninja").read_text())

    def test_only_what_the_parent_links_is_built(self):
        self.assertTrue(list((self.feedscope_build / "api").glob("libfeedscope.so*")))
        self.assertFalse((self.feedscope_build / "cli" / "feedscope").exists())
        self.assertFalse((self.feedscope_build / "python").exists())

    @unittest.skipUnless(cache_of(BUILD).get("FEEDSCOPE_WITH_CUDA") == "ON", "no CUDA: no injection library")
    def test_its_cli_finds_the_injection_library_of_the_subproject_build(self):
        # The CLI itself (libtorch's compile) is left out for time; where the build puts it and
        # where the library lands is what cli/watch.cc's lookup (../profiler/) depends on.
        run(["cmake", "--build", self.build, "--target", "feedscope_inject", "-j", JOBS])
        ninja = (self.build / "build.ninja").read_text()
        self.assertIn("build _deps/feedscope-build/cli/feedscope:", ninja)
        self.assertTrue((self.feedscope_build / "profiler" / "libfeedscope_inject.so").exists())
        self.assertFalse((self.build / "profiler").exists(), "not the parent's top build folder")


if __name__ == "__main__":
    unittest.main()
