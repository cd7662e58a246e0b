"""feedscope.DataLoader (issue #29): the loader of `feedscope run` from Python, through DLPack.

Run by ctest with PYTHONPATH=build/python and FEEDSCOPE_BINARY (make-dataset). Needs torch and
torchvision (Debian's python3-torch); skips without them. Nothing here depends on timing. The GPU
path runs where torch sees a GPU and is skipped, saying so, elsewhere; its bookkeeping is tested
on the simulated device by the C++ tests (tests/api/handed_loader_test.cc).
"""

import gc
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import textwrap
import unittest
import warnings

import feedscope

try:
    import torch
    import torchvision
    from torchvision import transforms
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False

FEEDSCOPE = os.environ.get("FEEDSCOPE_BINARY", "")
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def make_images(out, count=48, classes=3, size="96x72"):
    subprocess.run([FEEDSCOPE, "make-dataset", "images", "--out", str(out), "--count", str(count),
                    "--classes", str(classes), "--size", size], check=True, capture_output=True)


@unittest.skipUnless(HAVE_TORCH, "this python3 has no torch/torchvision")
@unittest.skipUnless(FEEDSCOPE, "FEEDSCOPE_BINARY is not set (run through ctest)")
class DataLoaderTestBase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory()
        cls.dir = pathlib.Path(cls._tmp.name)
        cls.images = cls.dir / "images"
        make_images(cls.images)
        cls.spec = f"images:{cls.images}"

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def loader(self, spec=None, **options):
        loader = feedscope.DataLoader(spec or self.spec, **options)
        self.addCleanup(loader.close)
        return loader


class CorrectnessTest(DataLoaderTestBase):
    def test_the_eval_pipeline_is_torchvisions_within_one_grey_level_and_labels_are_imagefolders(self):
        size = 64
        tf = transforms.Compose([transforms.Resize(size * 256 // 224), transforms.CenterCrop(size),
                                 transforms.ToTensor(), transforms.Normalize(MEAN, STD)])
        folder = torchvision.datasets.ImageFolder(str(self.images), tf)
        theirs = torch.utils.data.DataLoader(folder, batch_size=8)
        std = torch.tensor(STD).view(1, 3, 1, 1)
        for workers in (0, 2):
            ours = self.loader(batch_size=8, num_workers=workers, pipeline="eval", image_size=size)
            self.assertEqual(ours.class_to_idx, folder.class_to_idx)
            self.assertEqual(ours.classes, folder.classes)
            self.assertEqual(len(ours), len(theirs))
            batches = 0
            for (x, y), (tx, ty) in zip(ours, theirs):
                self.assertEqual(x.dtype, torch.float32)
                self.assertEqual(tuple(x.shape), tuple(tx.shape))
                self.assertEqual(y.dtype, torch.int64)
                self.assertTrue(torch.equal(y, ty), f"labels {y} against ImageFolder's {ty}")
                grey_levels = ((x - tx).abs() * std * 255).max().item()
                # One grey level, and float32's rounding of it.
                self.assertLessEqual(grey_levels, 1.0 + 1e-4, f"{workers} workers, batch {batches}")
                batches += 1
            self.assertEqual(batches, len(theirs))

    def test_the_train_pipeline_is_seeded_by_seed_and_epoch(self):
        a = self.loader(batch_size=16, num_workers=2, image_size=32, shuffle=True, seed=5)
        b = self.loader(batch_size=16, num_workers=0, image_size=32, shuffle=True, seed=5)
        first = [(x.clone(), y.clone()) for x, y in a]
        self.assertEqual([x.shape[0] for x, _ in first], [16, 16, 16])
        for (x, y), (bx, by) in zip(first, b):
            self.assertTrue(torch.equal(y, by), "the same order at any worker count")
            self.assertTrue(torch.equal(x, bx), "the same crops and flips at any worker count")
        second = [y.clone() for _, y in a]  # epoch 1: another order
        self.assertFalse(all(torch.equal(p[1], q) for p, q in zip(first, second)))
        a.set_epoch(0)
        again = [y for _, y in a]
        self.assertTrue(all(torch.equal(p[1], q) for p, q in zip(first, again)), "set_epoch(0)")
        mean = torch.cat([x for x, _ in first]).mean(dim=(0, 2, 3))
        self.assertTrue(((mean > -2.5) & (mean < 2.5)).all(), f"normalized: channel means {mean}")

    def test_the_images_are_the_slab_itself_and_kept_labels_keep_no_slab(self):
        loader = self.loader(batch_size=4, num_workers=2, image_size=32)
        x, y = next(iter(loader))
        self.assertEqual(x.data_ptr() % 4096, 0, "the images start a page-aligned slab")
        x[0, 0, 0, 0] = 42.0  # the user's batch: writable, as torch's own
        del x, y
        labels = []
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a pool that grew would warn
            for _ in range(3):
                labels += [y for _, y in loader]
        self.assertEqual(torch.cat(labels).numel(), 3 * 48)

    def test_other_datasets_run_reads(self):
        synthetic = self.loader("synthetic:3x8x8", batch_size=10, synthetic_samples=25, classes=4)
        shapes = [tuple(x.shape) for x, _ in synthetic]
        self.assertEqual(shapes, [(10, 3, 8, 8), (10, 3, 8, 8), (5, 3, 8, 8)])
        self.assertEqual(synthetic.classes, [0, 1, 2, 3])
        self.assertEqual(len(synthetic), 3)
        self.assertEqual(len(self.loader("synthetic:3x8x8", batch_size=10, synthetic_samples=25,
                                         drop_last=True)), 2)
        shards = self.dir / "shards"
        subprocess.run([FEEDSCOPE, "make-dataset", "webdataset", "--out", str(shards), "--count",
                        "40", "--shard-samples", "10", "--classes", "3", "--size", "64x48"],
                       check=True, capture_output=True)
        web = self.loader(f"webdataset:{shards}", batch_size=8, num_workers=2, classes=3,
                          image_size=32)
        with self.assertRaisesRegex(TypeError, "shards are streamed"):
            len(web)
        labels = torch.cat([y for _, y in web])
        self.assertEqual(labels.numel(), 40)
        self.assertTrue(((labels >= 0) & (labels < 3)).all())

    def test_a_rank_loads_its_distributed_share(self):
        whole = self.loader(batch_size=4, image_size=16)
        half = [self.loader(batch_size=4, image_size=16, rank=r, world_size=2) for r in (0, 1)]
        self.assertEqual(len(half[0]) + len(half[1]), len(whole))


class ErrorsTest(DataLoaderTestBase):
    def assert_refused(self, pattern, **options):
        spec = options.pop("dataset", self.spec)
        with self.assertRaisesRegex(feedscope.FeedscopeError, pattern):
            feedscope.DataLoader(spec, **options)

    def test_a_bad_option_names_the_key_and_what_is_allowed(self):
        self.assert_refused(r"num_workers: '-1' .* allowed: 0 \(load in the training thread\)",
                            num_workers=-1)
        self.assert_refused(r"pipeline: 'train2' .* allowed: train \| eval", pipeline="train2")
        self.assert_refused(r"batch_size: '0' .* allowed: 1 to", batch_size=0)
        self.assert_refused(r"bad_sample: 'ignore' .* allowed: fail \| skip", bad_sample="ignore")
        self.assert_refused(r"image_size: '4' .* allowed: 8 to 1024", image_size=4)
        self.assert_refused(r"device: 'tpu' .* allowed: auto \| cpu \| cuda \| cuda:N", device="tpu")
        self.assert_refused(r"batch_size: '2.5' .* is not an integer", batch_size=2.5)
        self.assert_refused(r"rank: 2 is not below world_size 2", rank=2, world_size=2)
        self.assert_refused(r"max_held_batches: -1 .* allowed: 0 to", max_held_batches=-1)
        self.assert_refused(r"unknown kind 'imgs'.* allowed: images:DIR",
                            dataset=f"imgs:{self.images}")
        self.assert_refused(r"/no/such/folder", dataset="images:/no/such/folder")
        self.assert_refused(r"not a number, string or bool", seed=object())

    def test_a_missing_gpu_is_a_clear_error(self):
        if torch.cuda.is_available():
            self.skipTest("this machine has a GPU")
        self.assert_refused(r"device: 'cuda.*' .* needs a GPU: no CUDA device", device="cuda")

    def test_a_bad_sample_names_its_file_and_iterating_goes_on(self):
        root = self.dir / "one_bad"
        make_images(root, count=12, classes=2)
        bad = sorted((root / "class_0001").iterdir())[0]
        bad.write_bytes(b"not a jpeg at all")
        loader = self.loader(f"images:{root}", batch_size=4, num_workers=2, image_size=16)
        it = iter(loader)
        delivered, errors = 0, []
        while True:
            try:
                x, _ = next(it)
                delivered += x.shape[0]
            except StopIteration:
                break
            except feedscope.FeedscopeError as e:
                errors.append(str(e))
        self.assertEqual(len(errors), 1, errors)
        self.assertIn(str(bad), errors[0])
        self.assertEqual(delivered, 8, "the batches after the bad one still come")
        skip = self.loader(f"images:{root}", batch_size=4, image_size=16, bad_sample="skip")
        sizes = [x.shape[0] for x, _ in skip]
        self.assertEqual(sum(sizes), 11, "the bad sample is left out")
        errors = skip.data_errors
        self.assertEqual((errors["bad"], errors["attempted"]), (1, 12))
        self.assertEqual(errors["examples"][0]["source"], str(bad))
        with self.assertRaisesRegex(feedscope.FeedscopeError, str(bad)):
            for _ in loader:  # a new epoch after the error: the bad file fails again
                pass

    def test_bad_data_over_max_bad_ratio_stops_with_the_counts(self):
        root = self.dir / "mostly_bad"
        make_images(root, count=8, classes=2)
        for path in sorted(root.rglob("*.jpg"))[:6]:
            path.write_bytes(b"broken")
        loader = self.loader(f"images:{root}", batch_size=2, image_size=16, bad_sample="skip",
                             max_bad_ratio=0.001)
        with self.assertRaisesRegex(feedscope.FeedscopeError, r"bad data: .* max_bad_ratio"):
            for _ in loader:
                pass


class LifetimeTest(DataLoaderTestBase):
    def test_held_batches_grow_the_pool_with_a_warning_and_are_never_overwritten(self):
        loader = self.loader(batch_size=2, num_workers=2, image_size=16, max_held_batches=10)
        kept, copies = [], []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with self.assertRaisesRegex(feedscope.FeedscopeError,
                                        r"held by batches still alive.*the pool grew"):
                for x, y in loader:
                    kept.append((x, y))
                    copies.append((x.clone(), y.clone()))
        grew = [w for w in caught if "grew" in str(w.message)]
        self.assertEqual(len(grew), 1, [str(w.message) for w in caught])
        self.assertIn("max_held_batches=10", str(grew[0].message))
        self.assertGreaterEqual(len(kept), 10)
        for (x, y), (cx, cy) in zip(kept, copies):
            self.assertTrue(torch.equal(x, cx) and torch.equal(y, cy), "a held batch changed")
        kept.clear()
        self.assertEqual(sum(1 for _ in loader), len(loader), "letting go lets it go on")

    def test_a_loop_that_keeps_one_batch_at_a_time_never_grows_the_pool(self):
        loader = self.loader(batch_size=2, num_workers=2, image_size=16)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for _ in range(2):
                for x, y in loader:
                    pass

    def test_break_second_iterator_and_tensors_that_outlive_the_loader(self):
        loader = self.loader(batch_size=4, num_workers=2, image_size=16)
        for i, _ in enumerate(loader):
            if i == 2:
                break
        self.assertEqual(sum(1 for _ in loader), len(loader), "a full epoch after a break")
        first = iter(loader)
        next(first)
        second = iter(loader)
        with self.assertRaisesRegex(feedscope.FeedscopeError, "replaced by a newer iter"):
            next(first)
        self.assertEqual(sum(1 for _ in second), len(loader))
        x, y = next(iter(loader))
        expected = x.clone()
        loader.close()
        del loader
        gc.collect()
        self.assertTrue(torch.equal(x, expected), "a batch outlives its loader")

    def test_a_tensor_torch_never_took_goes_back_to_the_pool(self):
        loader = self.loader(batch_size=2, num_workers=0, image_size=16, max_held_batches=0)

        def refuse(capsule):
            raise RuntimeError("a consumer that fails")
        loader._bind_torch()
        real, loader._from_dlpack = loader._from_dlpack, refuse
        it = iter(loader)
        for _ in range(3 * loader._info["slabs"]):  # a leaked slab would exhaust the pool
            with self.assertRaisesRegex(RuntimeError, "a consumer that fails"):
                next(it)
        loader._from_dlpack = real
        next(iter(loader))

    def test_a_fork_while_workers_run_is_clean_on_both_sides(self):
        program = textwrap.dedent(f"""
            import os, sys, torch, feedscope
            loader = feedscope.DataLoader({self.spec!r}, batch_size=4, num_workers=2,
                                          image_size=16)
            it = iter(loader)
            next(it)
            pid = os.fork()
            if pid == 0:  # the parent's loader is not usable here, and exiting does not hang
                try:
                    next(iter(loader))
                    sys.exit(3)
                except feedscope.FeedscopeError as e:
                    sys.exit(0 if "forked child" in str(e) else 2)
            _, status = os.waitpid(pid, 0)
            child = os.waitstatus_to_exitcode(status)
            delivered = 1 + sum(1 for _ in it)
            data = torch.utils.data.TensorDataset(torch.arange(32.0))
            theirs = torch.utils.data.DataLoader(data, batch_size=8, num_workers=2)
            both = sum(1 for _ in zip(loader, theirs))  # torch forks its workers meanwhile
            print(child, delivered, len(loader), both)
            """)
        done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                              timeout=120)
        self.assertEqual(done.returncode, 0, done.stderr)
        child, delivered, batches, both = map(int, done.stdout.split())
        self.assertEqual(child, 0, "the child was told it cannot use the parent's loader")
        self.assertEqual(delivered, batches, "the parent goes on")
        self.assertEqual(both, 4)

    def test_interpreter_exit_while_workers_run_is_clean(self):
        program = textwrap.dedent(f"""
            import sys, feedscope
            loader = feedscope.DataLoader({self.spec!r}, batch_size=2, num_workers=3,
                                          image_size=16, prefetch=4)
            it = iter(loader)
            kept = next(it)              # a batch alive at exit, workers busy loading
            if sys.argv[1] == "in-loop":
                for x, y in loader:
                    sys.exit(0)
            """)
        for how in ("at-top", "in-loop"):
            done = subprocess.run([sys.executable, "-c", program, how], capture_output=True,
                                  text=True, timeout=60)
            self.assertEqual(done.returncode, 0, how + ": " + done.stderr)
            self.assertEqual(done.stderr, "", how)


class SessionTest(DataLoaderTestBase):
    def test_under_a_session_the_workers_stages_join_the_report(self):
        loader = self.loader(batch_size=8, num_workers=2, image_size=32)
        report_dir = self.dir / "report"
        fs = feedscope.Session(report_dir, print=False, sample_hz=0, trace_gpu=False)
        for _ in range(2):
            for x, y in fs.wrap(loader):
                with fs.step(len(x)):
                    x.sum()
        report = fs.finish()
        fs.close()
        stages = report["stages"]
        # images: write each sample straight into the slab as they transform it: no collate span.
        for stage in ("read", "decode", "transform", "wait", "step"):
            self.assertGreater(stages[stage]["busy_s"], 0, stage)
        config = report["config"]
        self.assertEqual((config["num_workers"], config["batch_size"]), (2, 8))
        on_disk = json.loads((report_dir / "report.json").read_text())
        self.assertGreater(on_disk["stages"]["decode"]["busy_s"], 0)
        # Each sample's load time: the session reports what the loader measured, files named.
        samples = report["samples"]
        self.assertEqual(samples["measured_by"], "feedscope's loader")
        # Every delivered sample, and any the workers loaded ahead for the next epoch.
        self.assertGreaterEqual(samples["count"], 2 * 48)
        self.assertGreater(samples["load_ms"]["p50"], 0)
        self.assertLessEqual(samples["load_ms"]["p50"], samples["load_ms"]["max"])
        slowest = samples["slowest"][0]
        self.assertTrue(slowest["file"].startswith(str(self.images)), slowest)
        self.assertEqual((slowest["width"], slowest["height"], slowest["pixels"]), (96, 72, 96 * 72))
        self.assertGreaterEqual(loader.sample_costs()["count"], samples["count"])
        for _ in loader:  # the session is gone: the loader goes on, forwarding nothing
            pass


class AutoTest(DataLoaderTestBase):
    """num_workers="auto": the C++ tests move the setting mid-epoch by hand
    (tests/loader/batch_loader_autotune_test.cc); here, what Python sees of a loader that may move
    on its own, whatever this machine's timing makes it do."""

    def test_auto_gives_the_samples_of_any_fixed_count_and_tells_where_it_runs(self):
        auto = self.loader(batch_size=4, num_workers="auto", prefetch="auto", image_size=32,
                           shuffle=True, seed=3, max_workers=2, print_moves=False)
        fixed = self.loader(batch_size=4, num_workers=0, image_size=32, shuffle=True, seed=3)
        self.assertIsNone(fixed.autotune)
        for epoch in range(3):  # a few seconds: the tuner judges a window a second
            auto.set_epoch(epoch)
            fixed.set_epoch(epoch)
            for (x, y), (fx, fy) in zip(auto, fixed):
                self.assertTrue(torch.equal(y, fy) and torch.equal(x, fx), f"epoch {epoch}")
        tuned = auto.autotune
        self.assertEqual(tuned["bounds"]["max_workers"], 2)
        self.assertIn(auto.num_workers, (1, 2))
        # Where it settled: where it runs, unless a trial is still being measured.
        self.assertIn(tuned["final"]["num_workers"], (1, 2))
        for move in tuned["moves"]:
            self.assertEqual(set(move), {"t_s", "from", "to", "why", "before", "after", "kept"})

    def test_a_session_reports_the_tuning_and_a_bad_value_names_the_key(self):
        loader = self.loader(batch_size=8, num_workers="auto", image_size=32, max_workers=2,
                             print_moves=False)
        fs = feedscope.Session(self.dir / "auto-report", print=False, sample_hz=0,
                               trace_gpu=False)
        for x, y in fs.wrap(loader):
            with fs.step(len(x)):
                x.sum()
        report = fs.finish()
        fs.close()
        self.assertIsNotNone(report["autotune"], "the loader told the session it tunes itself")
        self.assertEqual(report["autotune"]["final"], loader.autotune["final"])
        with self.assertRaisesRegex(feedscope.FeedscopeError, "num_workers.*auto"):
            feedscope.DataLoader(self.spec, num_workers="many")
        with self.assertRaisesRegex(feedscope.FeedscopeError, "max_workers"):
            feedscope.DataLoader(self.spec, num_workers="auto", max_workers=-1)


class WatchTest(DataLoaderTestBase):
    def test_under_watch_an_unwrapped_loop_still_reports_its_stages(self):
        program = textwrap.dedent(f"""
            import feedscope
            loader = feedscope.DataLoader({self.spec!r}, batch_size=8, num_workers=2,
                                          image_size=32)
            for epoch in range(2):
                for x, y in loader:
                    x.sum()
            """)
        report_dir = self.dir / "watched"
        env = dict(os.environ, PYTHONPATH=os.environ.get("PYTHONPATH", ""))
        subprocess.run([FEEDSCOPE, "watch", "--report-dir", str(report_dir), "--", sys.executable,
                        "-c", program], check=True, capture_output=True, env=env, timeout=120)
        report = json.loads((report_dir / "report.json").read_text())
        self.assertTrue(report["program"]["spans"].startswith("session"), report["program"])
        for stage in ("read", "decode", "transform", "wait", "step"):
            self.assertGreater(report["stages"][stage]["busy_s"], 0, stage)
        self.assertEqual(report["throughput"]["steps"], 12)
        tried = report["program"]["try_loader"]  # no offer of what the program runs already
        if tried is not None:
            self.assertIn("feedscope's loader already", tried["skipped"])


class TryLoaderTest(DataLoaderTestBase):
    """watch measures feedscope's loader on a cpu_preprocess program's own files once it ended."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.large = cls.dir / "large"  # files open long enough to be seen in /proc/PID/fd
        make_images(cls.large, count=64, classes=2, size="480x360")

    def watch_plain_loop(self, *options):
        example = pathlib.Path(__file__).resolve().parents[2] / "examples" / "plain_python_loop.py"
        report_dir = self.dir / ("try" + "".join(options))
        subprocess.run([FEEDSCOPE, "watch", "--report-dir", str(report_dir), *options,
                        "--throughput-pattern", r"throughput: ([0-9.]+) samples/s", "--",
                        sys.executable, str(example), "--data", str(self.large), "--workers", "1",
                        "--steps", "40", "--batch-size", "8", "--image-size", "96"],
                       check=True, capture_output=True, timeout=300)
        report = json.loads((report_dir / "report.json").read_text())
        # The program's files' per-sample costs, whatever the bottleneck: feedscope's decoder on
        # each of the 64 files once, after it ended, and said to be that, not the program's times.
        samples = report["samples"]
        if "--no-try-loader" in options:
            self.assertIsNone(samples)
        else:
            self.assertIn("feedscope's decoder", samples["measured_by"])
            self.assertEqual(samples["count"], 64)
            self.assertTrue(samples["slowest"][0]["file"].startswith(str(self.large)), samples["slowest"][0])
            self.assertEqual(samples["slowest"][0]["pixels"], 480 * 360)
        if report["diagnosis"]["bottleneck"] != "cpu_preprocess":
            self.skipTest(f"the plain loop was {report['diagnosis']['bottleneck']} here, not "
                          "cpu_preprocess: no loader to offer")
        return report

    def test_the_fix_is_measured_on_the_programs_files(self):
        report = self.watch_plain_loop()
        tried = report["program"]["try_loader"]
        self.assertIsNone(tried["skipped"], tried)
        self.assertEqual(tried["dataset"], f"images:{self.large}")
        self.assertTrue(all(f.startswith(str(self.large)) for f in tried["files_seen"]))
        self.assertGreater(tried["samples_per_s"], 0)
        self.assertEqual(tried["num_workers"], 1)
        # Measured on the program's own workload, as its command line gives it.
        self.assertEqual((tried["batch_size"], tried["image_size"]), (8, 96), tried)
        self.assertIn("`--batch-size 8` on its command line", tried["batch_size_from"])
        self.assertIn("`--image-size 96` on its command line", tried["image_size_from"])
        self.assertGreater(tried["program_samples_per_s"], 0)
        evidence = " ".join(report["diagnosis"]["evidence"])
        self.assertIn("feedscope's loader on the program's files", evidence)
        if tried["ratio"] > 1:
            actions = [r["action"] for r in report["diagnosis"]["recommendations"]]
            self.assertTrue(any("feedscope.DataLoader on your files" in a for a in actions), actions)

    def test_no_try_loader_says_so(self):
        tried = self.watch_plain_loop("--no-try-loader")["program"]["try_loader"]
        self.assertEqual(tried["skipped"], "--no-try-loader")
        self.assertIsNone(tried["samples_per_s"])


@unittest.skipUnless(HAVE_TORCH and torch.cuda.is_available(), "no GPU for torch here: the device "
                     "path's bookkeeping runs on the simulated device in handed_loader_test.cc")
class GpuTest(DataLoaderTestBase):
    def test_batches_arrive_on_the_gpu_equal_to_the_host_ones(self):
        host = self.loader(batch_size=8, num_workers=2, pipeline="eval", image_size=32)
        gpu = self.loader(batch_size=8, num_workers=2, pipeline="eval", image_size=32,
                          device="cuda")
        for (x, y), (gx, gy) in zip(host, gpu):
            self.assertTrue(gx.is_cuda and gy.is_cuda)
            self.assertTrue(torch.equal(x, gx.cpu()) and torch.equal(y, gy.cpu()))

    def test_batches_kept_on_the_gpu_stay_intact(self):
        gpu = self.loader(batch_size=4, num_workers=2, image_size=16, device="cuda")
        kept = [(x, x.clone()) for x, _ in gpu]
        torch.cuda.synchronize()
        self.assertTrue(all(torch.equal(a, b) for a, b in kept))

    def test_a_side_stream_prefetchers_batches_are_read_whole_on_the_default_stream(self):
        """Taken inside `with torch.cuda.stream(side)`, read on the default stream after a long
        kernel there: the copy three batches on must not overwrite the buffer meanwhile."""
        options = dict(batch_size=4, num_workers=2, pipeline="eval", image_size=16)
        host = [x for x, _ in self.loader(**options)]
        side, seen = torch.cuda.Stream(), []
        it = iter(self.loader(device="cuda", **options))
        with torch.cuda.stream(side):
            nxt = next(it, None)
        while nxt is not None:
            torch.cuda.current_stream().wait_stream(side)
            images, labels = nxt
            with torch.cuda.stream(side):
                nxt = next(it, None)
            torch.cuda._sleep(20_000_000)  # the step on the default stream takes long
            seen.append(images.clone())
            del images, labels
        torch.cuda.synchronize()
        self.assertEqual(len(seen), len(host))
        for i, (x, y) in enumerate(zip(host, seen)):
            self.assertTrue(torch.equal(x, y.cpu()), f"batch {i} was overwritten while read")


if __name__ == "__main__":
    unittest.main()
