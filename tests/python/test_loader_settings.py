"""wrap() reads a torch DataLoader's own settings (issue #25), and the C ABI call that takes them.

Run by ctest with PYTHONPATH=build/python. The DataLoader tests need torch (Debian's
python3-torch) and skip without it; the rest need none. Nothing here depends on timing.
"""

import ctypes
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import unittest

import feedscope

try:
    import torch
    from torch.utils.data import BatchSampler, DataLoader, SequentialSampler, TensorDataset
except ImportError:
    torch = None

LOADER_KEYS = ("num_workers", "batch_size", "pin_memory", "prefetch_factor", "persistent_workers")


class LoaderSettingsTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = pathlib.Path(self._tmp.name)

    def tearDown(self):
        self._tmp.cleanup()

    def session(self, **options):
        options.setdefault("print", False)
        options.setdefault("sample_hz", 0)
        options.setdefault("trace_gpu", False)
        return feedscope.Session(self.dir / "report", **options)

    def run_loop(self, fs, iterable):
        for batch in fs.wrap(iterable):
            with fs.step(len(batch[0]) if isinstance(batch, (list, tuple)) else 1):
                pass
        report = fs.finish()
        on_disk = json.loads((self.dir / "report" / "report.json").read_text())
        self.assertEqual(on_disk["config"], report["config"])
        return report

    @unittest.skipIf(torch is None, "needs torch")
    def test_a_dataloader_with_workers_tells_its_settings_and_no_advice_starts_from_0_workers(self):
        data = TensorDataset(torch.arange(64, dtype=torch.float32).reshape(64, 1))
        loader = DataLoader(data, batch_size=8, num_workers=2, pin_memory=False)
        report = self.run_loop(self.session(), loader)
        config = report["config"]
        self.assertEqual(config["num_workers"], 2)
        self.assertEqual(config["batch_size"], 8)
        self.assertIs(config["pin_memory"], False)
        self.assertEqual(config["prefetch_factor"], loader.prefetch_factor)  # 2 by default
        self.assertIs(config["persistent_workers"], False)
        self.assertEqual(report["throughput"]["samples"], 64)
        for r in report["diagnosis"]["recommendations"]:
            self.assertNotIn("num_workers from 0", r["action"])
            self.assertNotEqual(r["setting"], "num_workers=1")

    @unittest.skipIf(torch is None, "needs torch")
    def test_options_given_to_the_session_win_over_what_wrap_reads(self):
        data = TensorDataset(torch.zeros(16, 1))
        loader = DataLoader(data, batch_size=4, num_workers=0, pin_memory=False)
        report = self.run_loop(self.session(num_workers=3, pin_memory=True), loader)
        config = report["config"]
        self.assertEqual(config["num_workers"], 3)
        self.assertIs(config["pin_memory"], True)
        self.assertEqual(config["batch_size"], 4)  # not given: read
        # No workers, nothing prefetched: null whatever torch says (1.13: 2, 2.x: None).
        self.assertIsNone(config["prefetch_factor"])

    @unittest.skipIf(torch is None, "needs torch")
    def test_the_batch_size_of_a_batch_sampler_is_read_where_the_loader_has_none(self):
        data = TensorDataset(torch.zeros(12, 1))
        sampler = BatchSampler(SequentialSampler(data), batch_size=3, drop_last=False)
        loader = DataLoader(data, batch_sampler=sampler)
        self.assertIsNone(loader.batch_size)
        report = self.run_loop(self.session(), loader)
        self.assertEqual(report["config"]["batch_size"], 3)
        self.assertEqual(report["config"]["num_workers"], 0)

    def test_a_plain_list_tells_nothing_and_unknown_settings_are_null(self):
        report = self.run_loop(self.session(), [([0] * 4,), ([0] * 4,)])
        config = report["config"]
        self.assertEqual(config["num_workers"], 0)
        self.assertEqual(config["batch_size"], 0)
        for key in ("pin_memory", "prefetch_factor", "persistent_workers"):
            self.assertIn(key, config)
            self.assertIsNone(config[key], key)

    def test_a_generator_tells_nothing(self):
        fs = self.session(num_workers=1)
        report = self.run_loop(fs, (([0, 1],) for _ in range(3)))
        self.assertEqual(report["config"]["num_workers"], 1)
        self.assertIsNone(report["config"]["pin_memory"])

    def test_a_loader_look_alike_is_read_without_torch_and_odd_values_are_left_out(self):
        class Loader:
            num_workers = 4
            batch_size = 2
            pin_memory = "cuda"  # not a bool: left out, not sent as true
            prefetch_factor = 3
            persistent_workers = True

            def __iter__(self):
                return iter([([0, 1],)] * 3)

        report = self.run_loop(self.session(), Loader())
        config = report["config"]
        self.assertEqual(config["num_workers"], 4)
        self.assertEqual(config["batch_size"], 2)
        self.assertIsNone(config["pin_memory"])
        self.assertEqual(config["prefetch_factor"], 3)
        self.assertIs(config["persistent_workers"], True)

    def test_a_loader_with_a_bad_setting_is_a_clear_error_at_wrap(self):
        class Loader:
            num_workers = -2
            batch_size = 2
            pin_memory = False

            def __iter__(self):
                return iter([])

        fs = self.session()
        with self.assertRaisesRegex(feedscope.FeedscopeError, "num_workers: must be >= 0, got -2"):
            fs.wrap(Loader())
        fs.finish()

    def test_the_package_does_not_import_torch(self):
        code = "import sys, feedscope; assert 'torch' not in sys.modules, 'feedscope imported torch'"
        subprocess.run([sys.executable, "-c", code], check=True, env=os.environ.copy())


class CApiLoaderSettingsTest(unittest.TestCase):
    """feedscope_loader_settings through ctypes, as any C caller would call it."""

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.fs = feedscope.Session(pathlib.Path(self._tmp.name) / "r", print=False, sample_hz=0,
                                    trace_gpu=False)
        self.lib = ctypes.CDLL(feedscope.library_path())
        self.lib.feedscope_loader_settings.restype = ctypes.c_int
        self.lib.feedscope_loader_settings.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        self.lib.feedscope_last_error.restype = ctypes.c_char_p

    def tearDown(self):
        self.fs.close()
        self._tmp.cleanup()

    def call(self, text):
        rc = self.lib.feedscope_loader_settings(self.fs._handle, text)
        return rc, self.lib.feedscope_last_error().decode()

    def assertRefused(self, text, message):
        rc, error = self.call(text)
        self.assertEqual(rc, -1, text)
        self.assertIn(message, error)

    def test_good_settings_are_taken(self):
        rc, _ = self.call(b'{"num_workers": 2, "batch_size": 8, "pin_memory": true,'
                          b' "prefetch_factor": 2, "persistent_workers": false}')
        self.assertEqual(rc, 0)
        config = self.fs.finish()["config"]
        self.assertEqual({k: config[k] for k in LOADER_KEYS},
                         {"num_workers": 2, "batch_size": 8, "pin_memory": True,
                          "prefetch_factor": 2, "persistent_workers": False})

    def test_bad_json_is_refused_naming_the_key_and_the_value(self):
        self.assertRefused(b"not json", "loader settings: not a JSON object: not json")
        self.assertRefused(b"[2]", "loader settings: not a JSON object")
        self.assertRefused(b'{"num_workers": "two"}',
                           "loader setting 'num_workers': expected an integer, got \"two\"")
        self.assertRefused(b'{"num_workers": 2.5}',
                           "loader setting 'num_workers': expected an integer, got 2.5")
        self.assertRefused(b'{"batch_size": 99999999999999999999}',
                           "loader setting 'batch_size': expected an integer")
        self.assertRefused(b'{"prefetch_factor": 4294967298}',
                           "loader setting 'prefetch_factor': expected an integer, got 4294967298")
        self.assertRefused(b'{"pin_memory": 1}',
                           "loader setting 'pin_memory': expected true or false, got 1")
        self.assertRefused(b'{"workers": 2}', "unknown loader setting 'workers'; allowed: "
                           "num_workers, batch_size, pin_memory, prefetch_factor, persistent_workers")
        self.assertRefused(b'{"num_workers": -1}', "num_workers: must be >= 0, got -1")
        self.assertRefused(b'{"batch_size": 4, "prefetch_factor": 0}',
                           "prefetch_factor: must be >= 1, got 0")
        self.assertRefused(None, "loader settings: NULL")
        rc = self.lib.feedscope_loader_settings(None, b"{}")
        self.assertEqual(rc, -1)
        self.assertIn("no session", self.lib.feedscope_last_error().decode())
        # None of the refused calls changed anything.
        config = self.fs.finish()["config"]
        self.assertEqual(config["batch_size"], 0)
        self.assertEqual(config["num_workers"], 0)
        self.assertIsNone(config["pin_memory"])

    def test_null_changes_nothing(self):
        self.assertEqual(self.call(b'{"num_workers": 2}')[0], 0)
        self.assertEqual(self.call(b'{"num_workers": null, "pin_memory": null}')[0], 0)
        config = self.fs.finish()["config"]
        self.assertEqual(config["num_workers"], 2)
        self.assertIsNone(config["pin_memory"])

    def test_a_finished_session_takes_no_settings(self):
        self.fs.finish()
        self.assertRefused(b'{"num_workers": 2}', "finished")


if __name__ == "__main__":
    unittest.main()
