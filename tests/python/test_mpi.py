"""`mpirun --oversubscribe -n 2 feedscope watch --report-dir R -- python3 ddp_job.py` with a real
Open MPI (Debian's openmpi-bin 4.1): DDP on gloo, its rendezvous from MASTER_ADDR/MASTER_PORT and
its rank from OMPI_COMM_WORLD_RANK, rank 1 slowed; every task's report in R/rank-N and `feedscope
merge R` naming rank 1. Then the launcher form, `watch -- mpirun -n 2 ...`: on one machine Open
MPI's ranks are mpirun's own children, each read with its rank from Open MPI's variables. Without
the package it skips, naming it (scripts/setup.sh installs it)."""

import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import unittest

HERE = pathlib.Path(__file__).resolve().parent
JOB = HERE / "ddp_job.py"
FEEDSCOPE = os.environ.get("FEEDSCOPE_BINARY", "")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mpirun(*argv):
    # --mca plm isolated: every rank on this machine, no ssh or srun looked for.
    return ["mpirun", "--oversubscribe", "--mca", "plm", "isolated", "-n", "2", *argv]


@unittest.skipUnless(FEEDSCOPE, "FEEDSCOPE_BINARY is not set (run through ctest)")
@unittest.skipUnless(shutil.which("mpirun") and shutil.which("ompi_info"),
                     "Open MPI is not installed: missing Debian package openmpi-bin "
                     "(scripts/setup.sh installs it)")
class MpiTaskWatchTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="feedscope-mpi-")
        self.addCleanup(self._tmp.cleanup)
        self.dir = pathlib.Path(self._tmp.name)
        self.env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
        if os.geteuid() == 0:  # Open MPI refuses root without both
            self.env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")

    def run_ok(self, argv, timeout=300):
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=self.dir, env=self.env)
        self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
        return r

    def test_every_rank_watched_as_a_task_and_under_the_launcher(self):
        r_dir = self.dir / "R"
        self.run_ok(mpirun(FEEDSCOPE, "watch", "--report-dir", str(r_dir), "--", sys.executable, str(JOB),
                           "--steps", "60", "--slow-rank", "1"))
        for rank in (0, 1):
            report = json.loads((r_dir / f"rank-{rank}" / "report.json").read_text())
            self.assertEqual([x["rank"] for x in report["ranks"]], [rank], report["ranks"])
            self.assertEqual(report["ranks"][0]["rank_source"], "openmpi")
            self.assertEqual(report["ranks"][0]["local_rank"], rank)
            self.assertIn("mpi=", report["job"]["id"])
        merged = self.run_ok([FEEDSCOPE, "merge", str(r_dir)], timeout=60)
        job = json.loads((r_dir / "report.json").read_text())
        self.assertEqual([x["rank"] for x in job["ranks"]], [0, 1])
        self.assertEqual(job["diagnosis"]["straggler"]["rank"], 1, job["diagnosis"]["evidence"])
        self.assertIn("rank 1 holds the job back", merged.stderr)

        # mpirun under watch, on one machine: its ranks are its children, each with its own rank.
        w_dir = self.dir / "W"
        self.run_ok([FEEDSCOPE, "watch", "--report-dir", str(w_dir), "--",
                     *mpirun(sys.executable, str(JOB), "--steps", "20")])
        report = json.loads((w_dir / "report.json").read_text())
        self.assertEqual(sorted(x["rank"] for x in report["ranks"]), [0, 1], report["program"]["notes"])
        self.assertEqual({x["rank_source"] for x in report["ranks"]}, {"openmpi"})
        self.assertFalse([n for n in report["program"]["notes"] if "One watch per rank" in n],
                         "every rank was read: no advice to watch each")


if __name__ == "__main__":
    unittest.main()
