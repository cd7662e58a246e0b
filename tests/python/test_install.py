"""`pip install ./python` into a virtual environment, offline as CI is: the installed package
carries libfeedscope.so and profiles a loop from any directory."""

import json
import os
import pathlib
import subprocess
import sys
import tempfile
import unittest

ROOT = pathlib.Path(__file__).resolve().parents[2]


class PipInstallTest(unittest.TestCase):
    def test_the_package_installs_into_a_venv_and_works_from_anywhere(self):
        with tempfile.TemporaryDirectory() as tmp:
            venv = pathlib.Path(tmp) / "venv"
            # --system-site-packages: setuptools and wheel for the offline build, as Debian ships
            # them; a machine that reaches PyPI needs neither flag.
            subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                           check=True)
            r = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-index",
                                "--no-build-isolation", str(ROOT / "python")],
                               capture_output=True, text=True, env=os.environ.copy())
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            report_dir = pathlib.Path(tmp) / "report"
            code = ("import feedscope\n"
                    "print(feedscope.library_path())\n"
                    f"with feedscope.Session({str(report_dir)!r}, print=False, sample_hz=0) as fs:\n"
                    "    for i in fs.wrap(range(5)):\n"
                    "        with fs.step(2):\n"
                    "            pass\n"
                    "try:\n"
                    "    import torch\n"
                    "except ImportError:\n"
                    "    torch = None\n"
                    "if torch is not None:  # feedscope.DataLoader comes with the package\n"
                    "    loader = feedscope.DataLoader('synthetic:3x8x8', batch_size=4,\n"
                    "                                  synthetic_samples=10)\n"
                    "    print('samples', sum(x.shape[0] for x, _ in loader))\n")
            env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FEEDSCOPE_LIBRARY")}
            r = subprocess.run([str(venv / "bin" / "python"), "-c", code], cwd=tmp,
                               capture_output=True, text=True, env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn(str(venv), r.stdout, "the library comes from the installed package")
            if "samples" in r.stdout:
                self.assertIn("samples 10", r.stdout)
            report = json.loads((report_dir / "report.json").read_text())
            self.assertEqual(report["throughput"]["samples"], 10)


if __name__ == "__main__":
    unittest.main()
