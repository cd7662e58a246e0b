"""`feedscope watch --try`: the program run again with each change feedscope can make from
outside, alternating with the unchanged command (cli/try_changes.h). Only what the runs measured is
checked against the report, never a speed-up: not RUN_SERIAL."""

import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time
import unittest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FEEDSCOPE = os.environ.get("FEEDSCOPE_BINARY", "")


@unittest.skipUnless(FEEDSCOPE, "FEEDSCOPE_BINARY is not set (run through ctest)")
class WatchTryTest(unittest.TestCase):
    """`watch --try`: the program run again with each change feedscope can make from outside,
    alternating with the unchanged command; what each measured, or how it failed."""

    TARGET = ROOT / "tests" / "python" / "try_target.py"

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = pathlib.Path(self._tmp.name)

    def tearDown(self):
        self._tmp.cleanup()

    def watch_try(self, command, *options):
        report_dir = self.dir / "report"
        r = subprocess.run([FEEDSCOPE, "watch", "--report-dir", str(report_dir), "--try",
                            "--try-seconds", "3", "--try-rounds", "1", *options, "--", *command],
                           capture_output=True, text=True, timeout=300,
                           env={k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"})
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return r, report_dir, json.loads((report_dir / "report.json").read_text())

    def test_a_change_that_fails_is_reported_with_how_it_ended_and_the_run_stands(self):
        r, report_dir, report = self.watch_try(
            [sys.executable, str(self.TARGET), "--steps", "25", "--fail-with-threads"])
        if report["diagnosis"]["bottleneck"] != "cpu_compute":
            self.skipTest(f"the loop was {report['diagnosis']['bottleneck']} here, not cpu_compute: "
                          "no thread change to try")
        tries = report["program"]["tries"]
        self.assertIsNone(tries["skipped"], tries)
        self.assertEqual((tries["seconds"], tries["rounds"], tries["unit"]), (3, 1, "samples/s"))
        self.assertIn("feedscope watch --try: 1 change(s)", r.stderr)  # said before it ran
        self.assertGreater(tries["unchanged_rates"][0], 0, tries)
        [change] = tries["changes"]
        self.assertEqual(change["change"], f"OMP_NUM_THREADS={os.cpu_count()}")
        self.assertEqual(change["env"]["MKL_NUM_THREADS"], str(os.cpu_count()))
        self.assertEqual(change["rates"], [None])
        self.assertIsNone(change["speedup"])
        self.assertEqual(len(change["failed"]), 1)
        self.assertIn("failed (exited with 3)", change["failed"][0])
        evidence = " ".join(report["diagnosis"]["evidence"])
        self.assertIn(f"tried OMP_NUM_THREADS={os.cpu_count()}: not measured (failed", evidence)
        self.assertFalse(any(rec["basis"].startswith("measured")
                             for rec in report["diagnosis"]["recommendations"]))
        # Each run's own report, beside the watched run's.
        self.assertTrue((report_dir / "tries" / "unchanged-1" / "report.json").exists())
        self.assertTrue((report_dir / "tries" / "change1-1" / "output.log").exists())

    def test_a_change_that_runs_gets_its_measured_speedup(self):
        r, _, report = self.watch_try([sys.executable, str(self.TARGET), "--steps", "25"])
        if report["diagnosis"]["bottleneck"] != "cpu_compute":
            self.skipTest(f"the loop was {report['diagnosis']['bottleneck']} here, not cpu_compute")
        [change] = report["program"]["tries"]["changes"]
        self.assertEqual(change["failed"], [])
        self.assertGreater(change["rates"][0], 0, change)
        unchanged = report["program"]["tries"]["unchanged_rates"][0]
        self.assertAlmostEqual(change["speedup"], change["rates"][0] / unchanged, places=9)
        # The loop is Python on one thread: more OpenMP threads change nothing it does; whatever
        # the ratio, the verdict follows it: advised with its measured ratio at 1.05x or more (one
        # round: no noise measured beyond that), else evidence and no advice of it left.
        recs = report["diagnosis"]["recommendations"]
        measured = [rec for rec in recs if rec["basis_kind"] == "measured"]
        evidence = " ".join(report["diagnosis"]["evidence"])
        if change["speedup"] >= 1.05:
            self.assertEqual(change["outcome"], "gain")
            self.assertEqual([rec["setting"] for rec in measured], [change["change"]])
            self.assertIs(recs[0], measured[0], "measured gains first")
            self.assertIn(f"{change['speedup']:.2f}x measured over 1 trial of 3 s", evidence)
        else:
            self.assertIn(change["outcome"], ("loss", "within the noise"))
            self.assertEqual(measured, [])
            self.assertIn(f"tried {change['change']}: {change['speedup']:.2f}x: not advised", evidence)
            self.assertFalse(any("OMP_NUM_THREADS" in rec["action"] or "set_num_threads" in rec["action"]
                                 for rec in recs), recs)

    def test_ctrl_c_during_the_tries_ends_them_and_the_report_is_written(self):
        report_dir = self.dir / "interrupted"
        p = subprocess.Popen([FEEDSCOPE, "watch", "--report-dir", str(report_dir), "--try",
                              "--try-seconds", "60", "--try-rounds", "2", "--", sys.executable,
                              str(self.TARGET), "--steps", "25"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             env={k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"})
        said = ""
        for line in p.stderr:  # its plan is said before the first run starts
            said += line
            if "round 1" in line or "feedscope watch --try: " in line and "change(s)" not in line:
                break
            if "change(s)" in line:
                time.sleep(2)  # the unchanged command's first run is under way
                p.send_signal(signal.SIGINT)
        _, rest = p.communicate(timeout=60)  # not the 4 runs of 60 s left
        said += rest
        self.assertEqual(p.returncode, 0, said)
        report = json.loads((report_dir / "report.json").read_text())
        tries = report["program"]["tries"]
        if tries["skipped"] is not None:
            self.skipTest(f"nothing was tried here: {tries['skipped']}")
        self.assertIn("interrupted", said)
        self.assertIn("watch --try: interrupted", " ".join(report["program"]["notes"]))
        self.assertEqual(len(tries["unchanged_rates"]), 1, tries)
        self.assertEqual(tries["changes"][0]["rates"], [], "no change ran after Ctrl-C")

    def test_without_a_measured_throughput_nothing_is_run(self):
        r, report_dir, report = self.watch_try([sys.executable, "-c", "import time; time.sleep(1)"])
        tries = report["program"]["tries"]
        self.assertIn("throughput was not measured", tries["skipped"])
        self.assertEqual(tries["changes"], [])
        self.assertFalse((report_dir / "tries").exists())


if __name__ == "__main__":
    unittest.main()
