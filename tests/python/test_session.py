"""The Python client (python/feedscope) on real loops: reports, timings, and bad use.

Run by ctest with PYTHONPATH=build/python; plain unittest, no torch needed.
"""

import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
import unittest

import feedscope


def slow_loader(n, fetch_s):
    """A loader whose every batch takes `fetch_s` to arrive."""
    for i in range(n):
        time.sleep(fetch_s)
        yield list(range(8)), i


class SessionTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = pathlib.Path(self._tmp.name)

    def tearDown(self):
        self._tmp.cleanup()

    def session(self, **options):
        options.setdefault("print", False)
        options.setdefault("sample_hz", 0)
        return feedscope.Session(self.dir / "report", **options)

    def test_a_wrapped_loop_writes_the_reports_with_wait_and_step_measured(self):
        fs = self.session(warmup=2)
        for x, _ in fs.wrap(slow_loader(12, 0.004)):
            with fs.step(len(x)):
                time.sleep(0.002)
        report = fs.finish()
        for name in ("report.json", "report.html", "trace.json"):
            self.assertTrue((self.dir / "report" / name).is_file(), name)
        on_disk = json.loads((self.dir / "report" / "report.json").read_text())
        self.assertEqual(on_disk["schema"], "feedscope.report/1")
        self.assertEqual(report["throughput"]["steps"], 10)
        self.assertEqual(report["throughput"]["samples"], 80)
        stages = report["stages"]
        self.assertEqual(stages["wait"]["count"], 10)
        self.assertEqual(stages["step"]["count"], 10)
        # Sleeps are at least what they ask for: the wait ~4 ms, the step ~2 ms.
        self.assertGreaterEqual(stages["wait"]["mean_ms"], 3.5)
        self.assertGreaterEqual(stages["step"]["mean_ms"], 1.8)
        self.assertGreater(stages["wait"]["mean_ms"], stages["step"]["mean_ms"])
        self.assertGreater(report["diagnosis"]["data_stall_ratio"], 0.2)
        self.assertTrue(report["diagnosis"]["verdict"])
        self.assertEqual(report["config"]["mode"], "wrap")

    def test_a_loop_that_waits_on_nothing_is_not_input_bound(self):
        # 30 ms steps: the loop's own waits are microseconds, so even a busy machine's preemption
        # of a few milliseconds leaves the stall far under the 5 % the diagnosis calls input-bound.
        fs = self.session(warmup=1)
        for x, _ in fs.wrap(slow_loader(11, 0)):
            with fs.step(len(x)):
                time.sleep(0.03)
        report = fs.finish()
        self.assertLess(report["diagnosis"]["data_stall_ratio"], 0.05)
        self.assertEqual(report["diagnosis"]["bottleneck"], "cpu_compute")

    def test_scopes_of_the_users_own_are_reported(self):
        fs = self.session()
        for x, _ in fs.wrap(slow_loader(5, 0)):
            with fs.scope("augment"):
                time.sleep(0.001)
            with fs.step(len(x)):
                pass
        report = fs.finish()
        self.assertIn("augment", report["custom_stages"])
        self.assertEqual(report["custom_stages"]["augment"]["count"], 5)
        self.assertGreaterEqual(report["custom_stages"]["augment"]["mean_ms"], 0.9)

    def test_the_context_manager_finishes_and_closes(self):
        with self.session() as fs:
            for x, _ in fs.wrap(slow_loader(3, 0)):
                with fs.step(len(x)):
                    pass
        self.assertIsNotNone(fs.report)
        self.assertEqual(fs.report["throughput"]["steps"], 3)
        with self.assertRaises(feedscope.FeedscopeError):
            fs.step(1).__enter__()

    def test_bad_use_raises_a_clear_python_exception(self):
        fs = self.session()
        with self.assertRaisesRegex(feedscope.FeedscopeError, "outside a loop wrapped"):
            with fs.step(1):
                pass
        with self.assertRaisesRegex(feedscope.FeedscopeError, "fixed stage"):
            fs.scope("wait")
        for x, _ in fs.wrap(slow_loader(2, 0)):
            with fs.step(len(x)):
                with self.assertRaisesRegex(feedscope.FeedscopeError, "do not nest"):
                    with fs.step(1):
                        pass
        fs.finish()
        with self.assertRaisesRegex(feedscope.FeedscopeError, "called already"):
            fs.finish()
        with self.assertRaisesRegex(feedscope.FeedscopeError, "finished"):
            fs.wrap([1])

    def test_bad_options_name_the_option(self):
        with self.assertRaisesRegex(feedscope.FeedscopeError, "unknown option 'warm_up'"):
            feedscope.Session(self.dir / "r", warm_up=3)
        with self.assertRaisesRegex(feedscope.FeedscopeError, "option 'warmup': expected"):
            feedscope.Session(self.dir / "r", warmup="three")
        with self.assertRaisesRegex(feedscope.FeedscopeError, 'gpu_trace: "10/1"'):
            feedscope.Session(self.dir / "r", gpu_trace="10/1")
        with self.assertRaisesRegex(feedscope.FeedscopeError, "option 'gpu_trace_lead': expected"):
            feedscope.Session(self.dir / "r", gpu_trace_lead="soon")

    def test_a_report_directory_that_cannot_be_written_is_an_exception(self):
        blocker = self.dir / "a-file"
        blocker.write_text("not a directory")
        with self.assertRaisesRegex(feedscope.FeedscopeError, "a-file"):
            feedscope.Session(blocker / "report", print=False, sample_hz=0)

    def test_the_metrics_endpoint_binds_and_names_its_address(self):
        fs = self.session(metrics_addr="127.0.0.1:0")
        host, port = fs.metrics_address.rsplit(":", 1)
        self.assertEqual(host, "127.0.0.1")
        self.assertGreater(int(port), 0)
        fs.finish()

    def test_a_forked_child_that_exits_normally_leaves_the_parents_session_alone(self):
        # A DataLoader worker is a fork holding a copy of the session; one whose interpreter exits
        # normally (not os._exit) runs finalizers. The copy must not finish the report or join
        # threads that live in the parent.
        fs = self.session()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                with self.assertRaisesRegex(feedscope.FeedscopeError, "forked child"):
                    for _ in fs.wrap([1]):
                        with fs.step(1):
                            pass
                fs.close()
            except BaseException:
                code = 1
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0)
        self.assertFalse((self.dir / "report" / "report.json").exists(), "the child wrote nothing")
        for x, _ in fs.wrap(slow_loader(3, 0)):
            with fs.step(len(x)):
                pass
        self.assertEqual(fs.finish()["throughput"]["steps"], 3)

    def test_closing_without_finish_still_writes_the_report(self):
        # No finish(): freeing the session finishes it, as the C++ one's destructor does.
        code = (
            "import feedscope, time\n"
            f"fs = feedscope.Session({str(self.dir / 'exit')!r}, print=False, sample_hz=0)\n"
            "for i in fs.wrap(range(4)):\n"
            "    with fs.step(1):\n"
            "        time.sleep(0.001)\n"
            "fs.close()\n")
        subprocess.run([sys.executable, "-c", code], check=True, env=os.environ.copy())
        report = json.loads((self.dir / "exit" / "report.json").read_text())
        self.assertEqual(report["throughput"]["steps"], 4)


if __name__ == "__main__":
    unittest.main()
