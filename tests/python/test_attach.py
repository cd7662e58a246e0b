"""`feedscope attach PID` on real PyTorch programs started without feedscope: the verdict `watch`
gives the same program, the data stall measured from outside beside the stall a feedscope Session
inside the same run measured, every rank of a torchrun job under its agent, and the errors (no such
process, not a Python program, another user's process without the right, a job that ends during
the window). The program is never signalled: it runs on after the window and ends by itself."""

import json
import os
import pathlib
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import uuid

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
WRAPPED = ROOT / "examples" / "wrap_python_loop.py"
PLAIN = ROOT / "examples" / "plain_python_loop.py"
JOB = HERE / "ddp_job.py"
FEEDSCOPE = os.environ.get("FEEDSCOPE_BINARY", "")

try:
    import torch  # noqa: F401
    import torchvision  # noqa: F401
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False


def trace_base_s(trace):
    """Where a feedscope trace.json's ts 0 is, in Unix seconds."""
    return trace["baseTimeNanoseconds"] / 1e9


def waited_in(trace, begin_s, end_s):
    """Seconds of the host's "wait" spans (the loop waiting for its next batch) inside
    [begin_s, end_s], Unix seconds."""
    base = trace_base_s(trace)
    waited = 0.0
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and e.get("name") == "wait" and e.get("pid") == 1:
            b = base + e["ts"] / 1e6
            waited += max(0.0, min(end_s, b + e["dur"] / 1e6) - max(begin_s, b))
    return waited


@unittest.skipUnless(FEEDSCOPE, "FEEDSCOPE_BINARY is not set (run through ctest)")
class AttachTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory()
        cls.dir = pathlib.Path(cls._tmp.name)
        cls.dir.chmod(0o755)
        cls.images = cls.dir / "images"
        subprocess.run([FEEDSCOPE, "make-dataset", "images", "--out", str(cls.images), "--count",
                        "512", "--classes", "4"], check=True, capture_output=True)

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def start(self, command, **kwargs):
        """A program started as users start theirs (not under feedscope); stopped at the end."""
        p = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                             start_new_session=True, **kwargs)

        def stop():  # the program and what it started (a torchrun agent's ranks)
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
        self.addCleanup(stop)
        return p

    def attach(self, name, pid, *options, expect=0):
        report_dir = self.dir / name
        r = subprocess.run([FEEDSCOPE, "attach", "--report-dir", str(report_dir), *options,
                            str(pid)], capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, expect, r.stdout + r.stderr)
        if expect != 0:
            return r, None
        for f in ("report.json", "report.html", "trace.json"):
            self.assertTrue((report_dir / f).exists(), f)
        report = json.loads((report_dir / "report.json").read_text())
        self.assertTrue(report["program"]["attached"])
        return r, report

    @unittest.skipUnless(HAVE_TORCH, "this python3 has no torch/torchvision")
    def test_an_input_bound_loop_gets_the_sessions_stall_from_outside(self):
        # One worker decoding images for a tiny model: the loop waits for data most of the time.
        # The Session inside measures its stall from the loop's own spans; attach, outside,
        # from where the training thread is.
        p = self.start([sys.executable, str(WRAPPED), "--data", str(self.images), "--workers", "1",
                        "--steps", "450", "--batch-size", "16", "--report-dir",
                        str(self.dir / "session")],
                       env={**os.environ, "PYTHONUNBUFFERED": "1"}, cwd=ROOT / "examples")
        time.sleep(4)  # its imports and its first epoch's workers
        _, report = self.attach("input", p.pid, "--duration", "8")
        self.assertIsNone(p.poll(), "attach must leave the program running")
        d = report["diagnosis"]
        self.assertEqual(d["bottleneck"], "cpu_preprocess", d)
        self.assertEqual(d["data_stall_source"], "blocked on the DataLoader queue", d)
        self.assertEqual(report["program"]["ended"], "duration")
        self.assertEqual(report["program"]["exit"], "still running")
        self.assertTrue(any(u.startswith("CUDA trace:") for u in report["program"]["unmeasured"]))
        waits = report["program"]["tree"]["main_thread_waits"]
        self.assertGreaterEqual(waits["looks"], 200, waits)
        # The Session's figure over attach's own window (its live windows go to no one: no watch
        # started it), from its trace once the program has ended by itself: both traces say where
        # their time 0 is in Unix time (baseTimeNanoseconds).
        self.assertEqual(p.wait(timeout=240), 0)
        begin = trace_base_s(json.loads((self.dir / "input" / "trace.json").read_text()))
        window = (begin, begin + report["program"]["wall_s"])
        session_trace = json.loads((self.dir / "session" / "trace.json").read_text())
        session = waited_in(session_trace, *window) / (window[1] - window[0])
        whole = json.loads((self.dir / "session" / "report.json").read_text())["diagnosis"]
        print(f"data stall over attach's {window[1] - window[0]:.1f} s: attach "
              f"{d['data_stall_ratio']:.3f}, the Session's {session:.3f} "
              f"(its whole run {whole['data_stall_ratio']:.3f})", file=sys.stderr)
        # One window read two ways: from outside, by looking where the training thread is about
        # 50 times a second, and inside, from the loop's own wait spans.
        self.assertLess(abs(d["data_stall_ratio"] - session), 0.10,
                        f"attach {d['data_stall_ratio']:.3f} vs the Session's {session:.3f} over "
                        f"the same {window[1] - window[0]:.1f} s")

    @unittest.skipUnless(HAVE_TORCH, "this python3 has no torch/torchvision")
    def test_a_compute_bound_loop_gets_what_watch_gives_it(self):
        p = self.start([sys.executable, str(PLAIN), "--in-memory", "--workers", "0", "--model",
                        "heavy", "--steps", "100000", "--batch-size", "64"])
        time.sleep(3)
        _, report = self.attach("compute", p.pid, "--duration", "6")
        self.assertIsNone(p.poll())
        d = report["diagnosis"]
        self.assertEqual(d["bottleneck"], "cpu_compute", d)
        self.assertEqual(report["program"]["tree"]["workers"], 0)

    @unittest.skipUnless(HAVE_TORCH, "this python3 has no torch/torchvision")
    def test_a_torchrun_jobs_agent_gives_every_rank(self):
        # --standalone's store is on port 29400 in torch 1.13, whatever holds it: a free port,
        # as test_distributed starts its jobs.
        with socket.socket() as free:
            free.bind(("127.0.0.1", 0))
            port = free.getsockname()[1]
        p = self.start([sys.executable, "-m", "torch.distributed.run", "--redirects", "1", "--tee",
                        "1", "--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{port}",
                        "--rdzv_id", f"attach-{uuid.uuid4()}", "--nnodes", "1",
                        "--nproc_per_node=2", str(JOB), "--steps", "100000"], cwd=self.dir)
        time.sleep(8)  # the agent, its rendezvous, both ranks' imports
        self.assertIsNone(p.poll(), "the torchrun job ended before attach")
        _, report = self.attach("job", p.pid, "--duration", "6")
        tree = report["program"]["tree"]
        self.assertEqual(tree["ranks"], 2, tree)
        self.assertEqual(len(report.get("ranks") or []), 2, report.get("ranks"))

    def test_progress_lines_it_appends_to_a_log_file_are_read(self):
        # nohup python train.py > train.log: its ImageNet-style lines, read from the file.
        log = self.dir / "train.log"
        code = ("import time\nfor i in range(10**6):\n    time.sleep(0.1)\n"
                "    print(f'Epoch: [0][{i:4d}/9999]\\tTime  0.100 ( 0.100)\\tData  0.050 ( 0.050)', flush=True)")
        with open(log, "w") as out:
            p = subprocess.Popen([sys.executable, "-c", code, "-b", "32"], stdout=out,
                                 stderr=subprocess.STDOUT, start_new_session=True)
        self.addCleanup(lambda: (p.kill(), p.wait()))
        time.sleep(1)
        _, report = self.attach("log", p.pid, "--duration", "3")
        self.assertAlmostEqual(report["throughput"]["samples_per_s"], 320, delta=80)
        self.assertIn("ImageNet", report["throughput"]["source"])
        self.assertTrue(any(str(log) in n for n in report["program"]["notes"]), report["program"]["notes"])

    def test_a_job_that_ends_during_the_window_gets_a_report(self):
        # 10 s of work, attached after 0.5: attach, which loads libtorch, took over 2.5 s to
        # reach its first read in a loaded fresh-clone CI and found a 3-s program ended.
        p = self.start([sys.executable, "-c",
                        "import time\nend = time.time() + 10\nwhile time.time() < end: pass"])
        time.sleep(0.5)
        r, report = self.attach("ends", p.pid, "--duration", "60")
        self.assertEqual(report["program"]["ended"], "ended", report["program"])
        self.assertLess(report["program"]["wall_s"], 30)
        self.assertIn("until it ended", r.stderr)

    def test_the_pid_errors_say_what_is_wrong(self):
        r, _ = self.attach("none", 999999999, expect=2)
        self.assertIn("no process 999999999", r.stderr)
        sleeper = self.start(["sleep", "60"])
        r, _ = self.attach("sleep", sleeper.pid, expect=2)
        self.assertIn("is not a Python or libtorch program", r.stderr)
        r = subprocess.run([FEEDSCOPE, "attach", "--duration", "-1", str(sleeper.pid)],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--duration", r.stderr)

    @unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"),
                         "needs root to run feedscope as another user (setpriv)")
    def test_another_users_process_names_the_right_that_is_missing(self):
        nobody = pwd.getpwnam("nobody")
        program = self.start([sys.executable, "-c", "import time; time.sleep(60)"])
        r = subprocess.run(["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}",
                            "--clear-groups", FEEDSCOPE, "attach", "--report-dir",
                            str(self.dir / "other"), str(program.pid)],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("no right to read process", r.stderr)
        self.assertIn("CAP_SYS_PTRACE", r.stderr)


if __name__ == "__main__":
    unittest.main()
