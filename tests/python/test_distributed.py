"""`feedscope watch` on every rank of a real torch.distributed job (DDP on gloo, the CPU), started
by torch.distributed.run as users start it: balanced ranks (one verdict, no straggler), one rank
made slow at loading (that rank named, with its cause), a rank that raises (which rank, how it
ended, the exit code passed through), the Python client's Session in every rank, and two
"machines" on loopback (two watches, --nnodes 2, a c10d rendezvous on 127.0.0.1) joined by
`feedscope merge`. Debian's torch 1.13 under Python 3.11 needs --redirects 1 --tee 1: its own
default of 0 fails to parse."""

import json
import os
import pathlib
import socket
import subprocess
import sys
import tempfile
import unittest
import uuid

HERE = pathlib.Path(__file__).resolve().parent
JOB = HERE / "ddp_job.py"
FEEDSCOPE = os.environ.get("FEEDSCOPE_BINARY", "")

try:
    import torch.distributed  # noqa: F401
    HAVE_TORCH = torch.distributed.is_available()
except ImportError:
    HAVE_TORCH = False


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(*args):
    return [sys.executable, "-m", "torch.distributed.run", "--redirects", "1", "--tee", "1", *args]


@unittest.skipUnless(FEEDSCOPE, "FEEDSCOPE_BINARY is not set (run through ctest)")
@unittest.skipUnless(HAVE_TORCH, "this python3 has no torch.distributed")
class DistributedWatchTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory()
        cls.dir = pathlib.Path(cls._tmp.name)

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def watch(self, name, command, expect=0, env=None):
        report_dir = self.dir / name
        r = subprocess.run([FEEDSCOPE, "watch", "--report-dir", str(report_dir), "--", *command],
                           capture_output=True, text=True, timeout=400, cwd=self.dir,
                           env={**os.environ, **(env or {})})
        self.assertEqual(r.returncode, expect, r.stdout[-3000:] + r.stderr[-3000:])
        return r, json.loads((report_dir / "report.json").read_text())

    def standalone(self, *job_args):
        # What --standalone does, on a free port: torch 1.13's --standalone puts its rendezvous
        # store on port 29400 whatever holds it, so a job still tearing down there (or another
        # test's) becomes this job's store, and when it goes the agent stops this job
        # ("RendezvousConnectionError: The connection to the C10d store has failed").
        return torchrun("--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{free_port()}",
                        "--rdzv_id", f"standalone-{uuid.uuid4()}", "--nnodes", "1",
                        "--nproc_per_node=2", str(JOB), *job_args)

    def test_balanced_ranks_have_one_verdict_and_no_straggler(self):
        _, report = self.watch("balanced", self.standalone("--steps", "60"))
        ranks = report["ranks"]
        self.assertEqual([r["rank"] for r in ranks], [0, 1])
        for r in ranks:
            self.assertEqual(r["num_workers"], 1, r)
            self.assertIsNotNone(r["main_thread_busy"], r)
            self.assertIsNone(r["data_stall_ratio"], "no spans: not measured")
            self.assertEqual(r["local_rank"], r["rank"])
        self.assertIsNone(report["diagnosis"]["straggler"], report["diagnosis"]["evidence"])
        self.assertEqual(report["job"]["world_size"], 2)

    def test_a_rank_slow_at_loading_is_named_with_its_cause(self):
        r, report = self.watch("slow", self.standalone("--steps", "100", "--slow-rank", "1"))
        straggler = report["diagnosis"]["straggler"]
        self.assertIsNotNone(straggler, report["diagnosis"]["evidence"])
        self.assertEqual(straggler["rank"], 1)
        self.assertEqual(straggler["bottleneck"], "cpu_preprocess")
        by_rank = {x["rank"]: x for x in report["ranks"]}
        self.assertGreater(by_rank[1]["worker_busy"], by_rank[0]["worker_busy"] + 0.2)
        self.assertIsNotNone(by_rank[0]["collective_wait_ratio"])
        # Each rank's data stall, from where its main thread waited (no spans): the slow loader's
        # rank waits for its batches, the other in its all-reduce, which is no data stall.
        self.assertIsNotNone(by_rank[1]["data_stall_ratio"], by_rank[1])
        self.assertIsNotNone(by_rank[0]["data_stall_ratio"], by_rank[0])
        self.assertGreater(by_rank[1]["data_stall_ratio"], by_rank[0]["data_stall_ratio"] + 0.3)
        self.assertIn("rank 1 holds the job back", r.stderr)
        self.assertTrue(report["diagnosis"]["recommendations"][0]["action"].startswith("rank 1"))

    def test_a_session_in_every_rank_measures_each_ranks_stall(self):
        build_python = pathlib.Path(os.environ.get("FEEDSCOPE_LIBRARY", "")).parent.parent
        env = {"PYTHONPATH": f"{build_python}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        _, report = self.watch("spans", self.standalone("--steps", "60", "--slow-rank", "1",
                                                        "--feedscope"), env=env)
        by_rank = {x["rank"]: x for x in report["ranks"]}
        for r in by_rank.values():
            self.assertIsNotNone(r["data_stall_ratio"], r)
            self.assertIsNotNone(r["samples_per_s"], r)
            self.assertIn("spans", r["collective_wait_source"])
        self.assertGreater(by_rank[1]["data_stall_ratio"], by_rank[0]["data_stall_ratio"] + 0.3)
        self.assertGreater(by_rank[0]["collective_wait_ratio"], 0.3)
        self.assertEqual(report["diagnosis"]["straggler"]["rank"], 1)
        self.assertIsNotNone(report["diagnosis"]["data_stall_ratio"], "the straggler's stall")
        for rank in (0, 1):  # each rank's Session wrote its own report
            self.assertTrue((self.dir / "feedscope-report" / f"rank-{rank}" / "report.json").exists())

    def test_a_straggler_that_moves_from_rank_to_rank_is_told_apart(self):
        # Each rank in turn loads 8x slower for 10 steps, 5 turns each: over the run both wait
        # alike; window by window one holds the other back, and not the same one.
        build_python = pathlib.Path(os.environ.get("FEEDSCOPE_LIBRARY", "")).parent.parent
        env = {"PYTHONPATH": f"{build_python}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        _, report = self.watch("moving", self.standalone("--steps", "100", "--alternate-steps", "10",
                                                         "--feedscope"), env=env)
        timelines = {r["rank"]: r["timeline"] for r in report["ranks"]}
        self.assertEqual(report["job"]["pattern"], "moving_straggler",
                         (report["diagnosis"]["evidence"], timelines))
        self.assertIsNone(report["diagnosis"]["straggler"])
        self.assertIn("moves from rank to rank", report["diagnosis"]["verdict"])
        for r in report["ranks"]:
            stalls = [s for s in r["timeline"]["data_stall"] if s is not None]
            self.assertGreater(len(stalls), 4, r["timeline"])
            self.assertGreater(max(stalls), 0.3, "its turn to be slow shows")
            self.assertLess(min(stalls), 0.2, "and the other's turn too")

    def test_a_rank_that_raises_is_named_and_the_exit_code_passes_through(self):
        r, report = self.watch("raises", self.standalone("--steps", "200", "--raise-rank", "1",
                                                         "--raise-step", "30"), expect=1)
        self.assertEqual(report["program"]["ended"], "failed")
        by_rank = {x["rank"]: x for x in report["ranks"]}
        self.assertTrue(by_rank[1]["ended"].startswith("exited with 1"), by_rank[1])
        self.assertTrue(any("torchrun stopped the job" in n for n in report["job"]["notes"]),
                        report["job"]["notes"])
        self.assertIn("rank 1 fails at step 30", r.stdout + r.stderr)

    def test_two_machines_on_loopback_merge_into_one_job(self):
        port = free_port()
        common = ["--nnodes", "2", "--nproc_per_node", "1", "--rdzv_backend", "c10d",
                  "--rdzv_endpoint", f"127.0.0.1:{port}", "--rdzv_id", f"merge-{port}"]
        machines = []
        for node in (0, 1):
            d = self.dir / f"node{node}"
            cmd = [FEEDSCOPE, "watch", "--report-dir", str(d), "--",
                   *torchrun(*common, "--node_rank", str(node), str(JOB), "--steps", "50",
                             "--slow-rank", "1")]
            machines.append((d, subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                                 stderr=subprocess.STDOUT, text=True, cwd=self.dir)))
        for d, p in machines:
            out, _ = p.communicate(timeout=400)
            self.assertEqual(p.returncode, 0, out[-3000:])
        job = self.dir / "job"
        r = subprocess.run([FEEDSCOPE, "merge", "--report-dir", str(job),
                            *(str(d) for d, _ in machines)], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        report = json.loads((job / "report.json").read_text())
        self.assertEqual(sorted(x["rank"] for x in report["ranks"]), [0, 1])
        self.assertEqual(report["diagnosis"]["straggler"]["rank"], 1, report["diagnosis"])
        for f in ("report.html", "trace.json"):
            self.assertTrue((job / f).exists(), f)
        trace = json.loads((job / "trace.json").read_text())["traceEvents"]
        for rank in report["ranks"]:  # its track: its life, and its CPU over time as counters
            track = [e for e in trace if e.get("pid") == 100000 + rank["rank"]]
            self.assertEqual(len([e for e in track if e["ph"] == "X"]), 1, track[:3])
            cpu = [e for e in track if e["ph"] == "C" and e["name"] == "cpu"]
            self.assertEqual(len(cpu), len(rank["timeline"]["workers_cores"]))
            self.assertGreater(len(cpu), 3)
        # The same machine's report twice, or a report of another job, is not one job.
        r = subprocess.run([FEEDSCOPE, "merge", "--report-dir", str(self.dir / "bad"),
                            str(machines[0][0]), str(self.dir / "balanced")],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(str(self.dir / "balanced"), r.stderr)


if __name__ == "__main__":
    unittest.main()
