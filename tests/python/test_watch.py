"""`feedscope watch` on real, unmodified PyTorch programs run by the interpreter's own torch: the
verdict from the process tree alone, the program's exit code and output passed through, a report
also for a failing, crashing or interrupted program, and the spans of a feedscope Session inside
the program joined into the report."""

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
PLAIN = ROOT / "examples" / "plain_python_loop.py"
WRAPPED = ROOT / "examples" / "wrap_python_loop.py"
FEEDSCOPE = os.environ.get("FEEDSCOPE_BINARY", "")

try:
    import torch  # noqa: F401
    import torchvision  # noqa: F401
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False


@unittest.skipUnless(FEEDSCOPE, "FEEDSCOPE_BINARY is not set (run through ctest)")
class WatchTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory()
        cls.dir = pathlib.Path(cls._tmp.name)
        cls.images = cls.dir / "images"
        subprocess.run([FEEDSCOPE, "make-dataset", "images", "--out", str(cls.images), "--count",
                        "128", "--classes", "4"], check=True, capture_output=True)

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def watch(self, name, command, *options, expect=0):
        report_dir = self.dir / name
        tmp = self.dir / f"tmp-{name}"  # where the watch keeps its channel while it runs
        tmp.mkdir()
        r = subprocess.run([FEEDSCOPE, "watch", "--report-dir", str(report_dir), *options, "--",
                            *command], capture_output=True, text=True, timeout=300,
                           env={**os.environ, "TMPDIR": str(tmp)})
        self.assertEqual(r.returncode, expect, r.stdout + r.stderr)
        self.assertEqual(list(tmp.iterdir()), [], "the channel directory outlived the watch")
        for f in ("report.json", "report.html", "trace.json", "timeseries.csv"):
            self.assertTrue((report_dir / f).exists(), f)
        return r, json.loads((report_dir / "report.json").read_text())

    @unittest.skipUnless(HAVE_TORCH, "this python3 has no torch/torchvision")
    def test_images_through_one_worker_and_a_tiny_model_are_input_bound(self):
        r, report = self.watch(
            "input", [sys.executable, str(PLAIN), "--data", str(self.images), "--workers", "1",
                      "--steps", "150", "--batch-size", "16"],
            "--throughput-pattern", r"throughput: ([0-9.]+) samples/s")
        self.assertIn("loss ", r.stdout)  # the program's output passes through
        tree = report["program"]["tree"]
        self.assertEqual(tree["workers"], 1, tree)
        # The worker wants its core all along: running, or runnable and waiting for it on a
        # machine busy with other work (0.60 busy + 0.35 waiting seen under a parallel build).
        self.assertGreater(tree["worker_busy"] + tree["worker_run_wait"], 0.6, tree)
        self.assertEqual(report["program"]["ended"], "exited")
        self.assertEqual(report["config"]["mode"], "watch")
        d = report["diagnosis"]
        self.assertEqual(d["bottleneck"], "cpu_preprocess", d)
        self.assertGreater(report["throughput"]["samples_per_s"], 0)
        roles = {p["role"] for p in tree["processes"]}
        self.assertEqual(roles, {"trainer", "loader_worker"}, tree["processes"])

    @unittest.skipUnless(HAVE_TORCH, "this python3 has no torch/torchvision")
    def test_a_shell_script_that_runs_the_program_is_followed_to_it(self):
        # `; exit $?` keeps bash from exec'ing python: bash stays the parent and waits, as a
        # train.sh with more than one line does.
        script = (f"echo starting; {sys.executable} {PLAIN} --data {self.images} --workers 1 "
                  f"--steps 150 --batch-size 16; exit $?")
        _, report = self.watch("launcher", ["bash", "-c", script])
        program = report["program"]
        tree = program["tree"]
        roles = {p["pid"]: p["role"] for p in tree["processes"]}
        self.assertEqual(roles[program["pid"]], "launcher", tree["processes"])
        self.assertNotEqual(tree["trainer_pid"], program["pid"])
        self.assertEqual(roles[tree["trainer_pid"]], "trainer")
        self.assertIn(tree["trainer_name"], ("python3", os.path.basename(sys.executable)[:15]))
        self.assertEqual(tree["workers"], 1, tree)
        self.assertIn("loader_worker", roles.values())
        # The worker wants its core all along: running, or runnable and waiting for it on a
        # machine busy with other work (0.60 busy + 0.35 waiting seen under a parallel build).
        self.assertGreater(tree["worker_busy"] + tree["worker_run_wait"], 0.6, tree)
        self.assertEqual(report["diagnosis"]["bottleneck"], "cpu_preprocess", report["diagnosis"])
        self.assertTrue(any(n.startswith("trainer: ") for n in program["notes"]), program["notes"])

    @unittest.skipUnless(HAVE_TORCH, "this python3 has no torch/torchvision")
    def test_in_memory_data_and_a_heavy_mlp_are_compute_bound(self):
        _, report = self.watch(
            "compute", [sys.executable, str(PLAIN), "--in-memory", "--workers", "0", "--model",
                        "heavy", "--steps", "40", "--batch-size", "64"])
        d = report["diagnosis"]
        self.assertEqual(d["bottleneck"], "cpu_compute", d)
        self.assertEqual(report["program"]["tree"]["workers"], 0)

    @unittest.skipUnless(HAVE_TORCH, "this python3 has no torch/torchvision")
    def test_hogwild_training_processes_are_trainers_not_loader_workers(self):
        # mnist_hogwild's shape: a script that forks 2 processes training one shared model, each
        # with a DataLoader worker of its own, and waits for them in join().
        _, report = self.watch(
            "hogwild", [sys.executable, str(ROOT / "tests" / "corpus" / "hogwild_train.py"),
                        "--processes", "2", "--steps", "250"], "--no-try-loader")
        tree = report["program"]["tree"]
        roles = [p["role"] for p in tree["processes"]]
        self.assertEqual(tree["trainers"], 2, tree["processes"])
        self.assertEqual(roles.count("trainer"), 2, roles)
        self.assertIn("launcher", roles)
        d = report["diagnosis"]
        self.assertEqual(d["bottleneck"], "cpu_compute", d)
        self.assertFalse([r for r in d["recommendations"] if r["setting"].startswith("num_workers")], d)

    @unittest.skipUnless(HAVE_TORCH, "this python3 has no torch/torchvision")
    def test_a_program_that_fails_keeps_its_exit_code_and_gets_a_report(self):
        r, report = self.watch(
            "fails", [sys.executable, str(PLAIN), "--in-memory", "--workers", "0",
                      "--fail-at-step", "5"], expect=1)
        self.assertIn("a bug at step 5", r.stderr)
        self.assertEqual(report["program"]["ended"], "failed")
        self.assertEqual(report["program"]["exit"], "exited with 1")

    def test_a_crash_is_reported_as_one(self):
        _, report = self.watch("crash", [sys.executable, "-c", "import os; os.abort()"],
                               expect=128 + signal.SIGABRT)
        self.assertEqual(report["program"]["ended"], "crashed")
        self.assertIn("SIGABRT", report["program"]["exit"])
        html = (self.dir / "crash" / "report.html").read_text()
        self.assertIn("<h2>Program</h2>", html)
        self.assertIn("killed by SIGABRT", html)

    def test_a_program_that_fails_at_once_gets_how_it_ended_and_no_bottleneck(self):
        # Issue #25: a missing script ran for milliseconds; a bottleneck of it would be invented.
        r, report = self.watch("missing", [sys.executable, str(self.dir / "no-such-train.py")],
                               expect=2)
        d = report["diagnosis"]
        self.assertIsNone(d["bottleneck"], d)
        self.assertEqual(d["recommendations"], [])
        self.assertIn("before anything could be measured", d["verdict"])
        self.assertIsNone(report["throughput"]["samples_per_s"])
        self.assertIsNone(d["data_stall_ratio"])
        self.assertIn("bottleneck: none (not measured)", r.stderr)
        html = (self.dir / "missing" / "report.html").read_text()
        self.assertIn("Not measured: the program sent no stage spans", html)

    def test_a_signal_to_feedscope_reaches_the_program_and_the_report_says_so(self):
        report_dir = self.dir / "interrupted"
        program = "import time\nprint('ready', flush=True)\nwhile True: time.sleep(0.01)\n"
        p = subprocess.Popen([FEEDSCOPE, "watch", "--report-dir", str(report_dir), "--",
                              sys.executable, "-c", program], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        self.assertEqual(p.stdout.readline().strip(), "ready")
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 128 + signal.SIGTERM, err)
        report = json.loads((report_dir / "report.json").read_text())
        self.assertEqual(report["program"]["ended"], "interrupted")
        self.assertEqual(report["interrupted"], "SIGTERM")

    def test_duration_stops_the_program_and_exits_zero(self):
        start = time.monotonic()
        _, report = self.watch("duration", [sys.executable, "-c",
                                            "import time\nwhile True: time.sleep(0.01)\n"],
                               "--duration", "1")
        self.assertLess(time.monotonic() - start, 30)
        self.assertEqual(report["program"]["ended"], "duration")

    def test_a_program_that_cannot_start_is_named(self):
        r = subprocess.run([FEEDSCOPE, "watch", "--report-dir", str(self.dir / "missing"), "--",
                            "no-such-program-feedscope"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 127)
        self.assertIn("no-such-program-feedscope", r.stderr)

    def test_bad_options_exit_2_naming_them(self):
        r = subprocess.run([FEEDSCOPE, "watch", "--throughput-pattern", "no group", "--", "true"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--throughput-pattern", r.stderr)
        r = subprocess.run([FEEDSCOPE, "watch"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("COMMAND", r.stderr)
        r = subprocess.run([FEEDSCOPE, "watch", "--gpu-trace", "10/1", "--", "true"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn('--gpu-trace: "10/1"', r.stderr)

    @unittest.skipUnless(os.environ.get("FEEDSCOPE_INJECT_HOST"), "built without CUDA")
    def test_cuda_activity_of_the_program_reaches_the_report(self):
        # A program that "initializes CUDA" through stand-ins of the driver and CUPTI: the
        # injection library records what the stand-in CUPTI delivers, the watcher summarizes it.
        host = os.environ["FEEDSCOPE_INJECT_HOST"]
        _, report = self.watch("cuda", [host, os.environ["FEEDSCOPE_INJECT_LIB"], "env",
                                        "sleep:700", os.environ["FEEDSCOPE_FAKE_CUDA_DRIVER"],
                                        os.environ["FEEDSCOPE_FAKE_CUPTI"]])
        g = report["gpu_trace"]
        self.assertEqual(g["kernels"], 1, g)
        self.assertEqual(g["h2d"]["pinned_bytes"], 4096, g)
        # Neither the GPU (one kernel) nor the host is busy: no launch-bound verdict.
        self.assertNotEqual(report["diagnosis"]["bottleneck"], "launch_overhead")
        # One note: the CUPTI the program traced with, by version and path, and its clock.
        notes = report["program"]["notes"]
        self.assertEqual(len(notes), 1, notes)
        self.assertRegex(notes[0], r"^CUDA trace of pid \d+: recording: CUPTI of CUDA \d+\.\d+ "
                                   r"\(API version \d+\) from ")
        self.assertIn(os.environ["FEEDSCOPE_FAKE_CUPTI"] + "; timestamps: CLOCK_MONOTONIC", notes[0])
        self.assertEqual(g["records_bad_timestamps"], 0, g)
        trace = json.loads((self.dir / "cuda" / "trace.json").read_text())
        names = {e.get("name") for e in trace.get("traceEvents", trace)}
        self.assertIn("foo(int)", names)
        # Sampled by default (1 s of every 10 after the first 5 s): said in the trace's mode and
        # in what the summary read; 0.7 s is all lead, so all of it was read, unscaled.
        self.assertEqual(g["tracing"]["sampling"], "1/10", g["tracing"])
        self.assertEqual(g["sampled"]["sampling"], "1/10", g["sampled"])
        self.assertEqual(g["sampled"]["lead_s"], 5, g["sampled"])
        self.assertEqual(g["sampled"]["windows_without_records"], 0, g["sampled"])
        self.assertAlmostEqual(g["sampled"]["scale"], 1.0, places=6)
        # --gpu-trace whole: every record, and nothing scaled.
        _, whole = self.watch("cuda-whole", [host, os.environ["FEEDSCOPE_INJECT_LIB"], "env",
                                             "sleep:300", os.environ["FEEDSCOPE_FAKE_CUDA_DRIVER"],
                                             os.environ["FEEDSCOPE_FAKE_CUPTI"]],
                              "--gpu-trace", "whole")
        self.assertEqual(whole["gpu_trace"]["tracing"]["sampling"], "whole")
        self.assertIsNone(whole["gpu_trace"]["sampled"])
        self.assertEqual(whole["gpu_trace"]["kernels"], 1)

    @unittest.skipUnless(HAVE_TORCH, "this python3 has no torch/torchvision")
    def test_a_feedscope_session_inside_the_program_sends_its_spans(self):
        env_dir = self.dir / "own-report"
        _, report = self.watch(
            "session", [sys.executable, str(WRAPPED), "--data", str(self.images), "--workers", "1",
                        "--steps", "12", "--warmup", "2", "--batch-size", "16", "--report-dir",
                        str(env_dir)])
        self.assertTrue(report["program"]["spans"].startswith("session (pid "), report["program"])
        self.assertEqual(report["stages"]["wait"]["count"], 12)
        self.assertEqual(report["stages"]["step"]["count"], 12)
        self.assertGreater(report["throughput"]["samples_per_s"], 0)
        self.assertIn(report["diagnosis"]["bottleneck"], ("cpu_preprocess", "storage_io"))
        self.assertTrue((env_dir / "report.json").exists(), "the program's own report stays")


@unittest.skipUnless(FEEDSCOPE, "FEEDSCOPE_BINARY is not set (run through ctest)")
class SweepCommandTest(unittest.TestCase):
    # A program whose throughput is known: it prints 100 + 10 x workers, checks that its knobs
    # arrive in argv and in the environment alike, and fails at 3 workers.
    PROGRAM = ("import os, sys\n"
               "w, b = int(sys.argv[1]), int(sys.argv[2])\n"
               "assert os.environ['FEEDSCOPE_NUM_WORKERS'] == sys.argv[1]\n"
               "assert os.environ['FEEDSCOPE_BATCH_SIZE'] == sys.argv[2]\n"
               "sys.exit(1) if w == 3 else print(f'throughput: {100 + 10 * w + b} samples/s')\n")

    def test_points_substitute_the_knobs_and_take_the_printed_throughput(self):
        with tempfile.TemporaryDirectory() as tmp:
            r = subprocess.run(
                [FEEDSCOPE, "sweep", "--num-workers", "0,2,3", "--batch-size", "1,2", "--repeats",
                 "1", "--report-dir", tmp, "--throughput-pattern", r"throughput: ([0-9.]+) samples/s",
                 "--", sys.executable, "-c", self.PROGRAM, "{num_workers}", "{batch_size}"],
                capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            sweep = json.loads((pathlib.Path(tmp) / "sweep.json").read_text())
            points = {(p["num_workers"], p["batch_size"]): p for p in sweep["points"]}
            self.assertEqual(points[(2, 2)]["median_samples_per_s"], 122)
            self.assertEqual(points[(0, 1)]["median_samples_per_s"], 101)
            self.assertEqual(points[(3, 1)]["median_samples_per_s"], 0)
            self.assertEqual(points[(3, 1)]["bottleneck"], "failed (exited with 1)")
            self.assertIn("num_workers=2 batch_size=2", r.stdout)  # the best point
            self.assertTrue((pathlib.Path(tmp) / "report.html").exists())
            logs = list((pathlib.Path(tmp) / "points").glob("*/output.log"))
            self.assertEqual(len(logs), 6)  # the program's output is kept, not mixed into ours

    def test_without_spans_or_a_pattern_the_wall_time_of_a_fixed_workload_counts(self):
        program = "import sys, time\ntime.sleep(0.1 + 0.3 * int(sys.argv[1]))\n"
        with tempfile.TemporaryDirectory() as tmp:
            r = subprocess.run(
                [FEEDSCOPE, "sweep", "--num-workers", "0,1", "--repeats", "1", "--report-dir", tmp,
                 "--workload-samples", "100", "--", sys.executable, "-c", program, "{num_workers}"],
                capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            sweep = json.loads((pathlib.Path(tmp) / "sweep.json").read_text())
            rates = {p["num_workers"]: p["median_samples_per_s"] for p in sweep["points"]}
            self.assertGreater(rates[0], rates[1])
            self.assertLess(rates[0], 100 / 0.1)  # 100 samples in at least 0.1 s


if __name__ == "__main__":
    unittest.main()
