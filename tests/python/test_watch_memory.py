"""`feedscope watch` on the DataLoader's "memory leak" (docs/diagnosis.md#memory): a Dataset over
millions of Python strings read by forked workers is copy-on-access, named with its rate; the same
strings in one numpy array are not; a loop that keeps each step's loss tensor is a leak in one
process. Each rate is held within 25 % of what the program read of its own processes'
/proc/PID/smaps_rollup while it ran (memory_program.py --self-report)."""

import json
import os
import pathlib
import subprocess
import sys
import tempfile
import unittest

HERE = pathlib.Path(__file__).resolve().parent
PROGRAM = HERE / "memory_program.py"
FEEDSCOPE = os.environ.get("FEEDSCOPE_BINARY", "")

try:
    import numpy  # noqa: F401
    import torch  # noqa: F401
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False


def slope(points):
    """Least-squares slope of (t, value) pairs."""
    n = len(points)
    mt = sum(t for t, _ in points) / n
    mv = sum(v for _, v in points) / n
    stt = sum((t - mt) ** 2 for t, _ in points)
    return sum((t - mt) * (v - mv) for t, v in points) / stt


def own_rates(readings, after_first_third=True):
    """Each process's private and shared memory per second, from the program's own readings, over
    its life after its first third (its start-up, as feedscope leaves it out)."""
    out = {}
    for pid, pts in readings.items():
        if len(pts) < 6:
            continue
        t0, t1 = pts[0][0], pts[-1][0]
        kept = [p for p in pts if p[0] >= t0 + (t1 - t0) / 3] if after_first_third else pts
        if len(kept) < 4:
            continue
        out[int(pid)] = (slope([(p[0], p[1]) for p in kept]), slope([(p[0], p[2]) for p in kept]))
    return out


@unittest.skipUnless(FEEDSCOPE, "FEEDSCOPE_BINARY is not set (run through ctest)")
@unittest.skipUnless(HAVE_TORCH, "this python3 has no torch/numpy")
class WatchMemoryTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory()
        cls.dir = pathlib.Path(cls._tmp.name)

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def watch(self, name, *args):
        report_dir = self.dir / name
        own = self.dir / f"{name}-own.json"
        r = subprocess.run([FEEDSCOPE, "watch", "--report-dir", str(report_dir), "--no-try-loader",
                            "--", sys.executable, str(PROGRAM), "--self-report", str(own), *args],
                           capture_output=True, text=True, timeout=240)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        report = json.loads((report_dir / "report.json").read_text())
        self.assertIn("memory", (report_dir / "report.html").read_text())
        return report, json.loads(own.read_text())

    def test_strings_in_a_list_are_copied_by_each_worker_and_a_numpy_array_is_not(self):
        report, own = self.watch("strings", "--data", "strings", "--items", "2000000",
                                 "--pace-s", "0.06")
        tree = report["program"]["tree"]
        memory = tree["memory"]
        self.assertEqual(memory["source"], "smaps_rollup")
        self.assertGreater(memory["rollup_readings"], 10, memory)
        self.assertGreater(memory["available_last_bytes"], 0)
        self.assertTrue(memory["timeline"]["workers_private_bytes"], memory)
        findings = {f["kind"]: f for f in report["diagnosis"]["memory"]}
        self.assertIn("memory_copy_on_access", findings, report["diagnosis"])
        self.assertNotIn("memory_leak_one_process", findings, report["diagnosis"])
        copy = findings["memory_copy_on_access"]
        self.assertGreater(copy["private_bytes_per_s"], 0)
        self.assertLess(copy["shared_bytes_per_s"], 0, "the shared pages are what they copy")
        self.assertIsNotNone(copy["exhausted_in_s"])
        self.assertIn("numpy", copy["fix"])
        self.assertIsNotNone(report["diagnosis"]["bottleneck"], "beside the bottleneck")
        # Each worker's rate against the program's own reading of it.
        rates = own_rates(own["processes"])
        watched = {int(pid): r for pid, r in memory["worker_private_bytes_per_s"].items() if r}
        both = sorted(set(rates) & set(watched))
        self.assertGreaterEqual(len(both), 2, (rates, watched))
        mine = sum(rates[p][0] for p in both) / len(both)
        theirs = sum(watched[p] for p in both) / len(both)
        self.assertGreater(mine, 1 << 20, rates)
        self.assertAlmostEqual(theirs / mine, 1.0, delta=0.25,
                               msg=f"feedscope {theirs / 2**20:.1f} MiB/s, /proc {mine / 2**20:.1f} MiB/s")
        self.assertAlmostEqual(copy["private_bytes_per_s"] / (2 * mine), 1.0, delta=0.25)
        for p in both:
            self.assertLess(rates[p][1], 0, "the program saw its workers' shared memory fall too")

        report, own = self.watch("numpy", "--data", "numpy", "--items", "2000000",
                                 "--pace-s", "0.06", "--epochs", "1")
        self.assertEqual(report["diagnosis"]["memory"], [], report["diagnosis"])
        for p in report["program"]["tree"]["processes"]:
            if p["role"] == "loader_worker" and p["memory"] and p["memory"]["private_bytes_per_s"]:
                self.assertLess(p["memory"]["private_bytes_per_s"], 1 << 20, p)

    def test_a_loop_that_keeps_each_loss_tensor_is_a_leak_in_the_trainer(self):
        # 800 steps: about 24 s, a trend over 15 s of them, past the 10 s a leak is called over.
        report, own = self.watch("leak", "--leak", "--steps", "800", "--pace-s", "0.04")
        findings = report["diagnosis"]["memory"]
        self.assertEqual([f["kind"] for f in findings], ["memory_leak_one_process"], report["diagnosis"])
        leak = findings[0]
        self.assertEqual(leak["role"], "trainer")
        self.assertEqual(leak["pids"], [own["trainer"]])
        mine = own_rates(own["processes"], after_first_third=False)[own["trainer"]][0]
        self.assertAlmostEqual(leak["private_bytes_per_s"] / mine, 1.0, delta=0.25,
                               msg=f"feedscope {leak['private_bytes_per_s'] / 2**20:.1f} MiB/s, "
                                   f"/proc {mine / 2**20:.1f} MiB/s")


if __name__ == "__main__":
    unittest.main()
