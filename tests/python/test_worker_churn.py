"""`feedscope watch` on a DataLoader that starts its workers again every epoch (tests/python/
short_epochs.py: 4 workers, 1.5 s each to start, 1-s epochs): the churn is named and
persistent_workers=True advised, with a prediction; the same loop with persistent workers is not
told so."""

import json
import os
import pathlib
import subprocess
import sys
import tempfile
import unittest

HERE = pathlib.Path(__file__).resolve().parent
PROGRAM = HERE / "short_epochs.py"
FEEDSCOPE = os.environ.get("FEEDSCOPE_BINARY", "")

try:
    import torch  # noqa: F401
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False


@unittest.skipUnless(FEEDSCOPE, "FEEDSCOPE_BINARY is not set (run through ctest)")
@unittest.skipUnless(HAVE_TORCH, "this python3 has no torch")
class WorkerChurnTest(unittest.TestCase):
    def watch(self, *args):
        with tempfile.TemporaryDirectory() as tmp:
            r = subprocess.run([FEEDSCOPE, "watch", "--report-dir", tmp, "--no-try-loader", "--",
                                sys.executable, str(PROGRAM), *args],
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            return json.loads((pathlib.Path(tmp) / "report.json").read_text())

    def test_workers_started_every_epoch_are_named_and_persistent_workers_advised(self):
        report = self.watch("--epochs", "5")
        d, churn = report["diagnosis"], report["program"]["tree"]["worker_churn"]
        self.assertIsNotNone(churn)
        self.assertGreaterEqual(churn["generations"], 5, churn)
        self.assertIn("tree_worker_churn", d["rules"], json.dumps(d, indent=1))
        advice = [r for r in d["recommendations"] if r["setting"] == "persistent_workers=True"]
        self.assertTrue(advice, d["recommendations"])
        self.assertGreater(advice[0]["predicted_speedup"], 1.05, advice[0]["basis"])

    def test_persistent_workers_are_not_told_to_persist(self):
        report = self.watch("--epochs", "5", "--persistent")
        d, churn = report["diagnosis"], report["program"]["tree"]["worker_churn"]
        self.assertEqual(churn["generations"], 1, churn)
        self.assertNotIn("tree_worker_churn", d["rules"])
        self.assertFalse([r for r in d["recommendations"] if r["setting"] == "persistent_workers=True"])


if __name__ == "__main__":
    unittest.main()
