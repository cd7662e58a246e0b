"""feedscope's loader in Python: a drop-in for DataLoader(ImageFolder(root, transform), ...).

    loader = feedscope.DataLoader("images:/data/train", batch_size=64, num_workers=4,
                                  pipeline="train", image_size=224, shuffle=True, seed=0)
    for images, labels in loader:   # float32 [B, 3, 224, 224], normalized as torchvision's
        ...                         # Normalize(ImageNet mean/std); int64 [B]

The loader `feedscope run` uses (C++ worker threads, no Python in them), over the same datasets and
with run's option names and messages. Batches reach torch through DLPack, viewing the batch's slab
(no copy); the slab goes back to the loader once the last tensor viewing it is freed. Documented
in docs/python-loader.md.
"""

import atexit
import ctypes
import json
import os
import sys
import warnings
import weakref

from . import FeedscopeError, _error, _lib, _now

__all__ = ["DataLoader"]


class _Batch(ctypes.Structure):
    _fields_ = [("index", ctypes.c_int64), ("epoch", ctypes.c_int64), ("size", ctypes.c_int64),
                ("images", ctypes.c_void_p), ("labels", ctypes.c_void_p),
                ("slabs", ctypes.c_int32), ("device_buffers", ctypes.c_int32)]


def _bind():
    p, i64 = ctypes.c_void_p, ctypes.c_int64
    sigs = {
        "feedscope_loader_create": (p, [ctypes.c_char_p]),
        "feedscope_loader_destroy": (None, [p]),
        "feedscope_loader_describe": (ctypes.c_char_p, [p]),
        "feedscope_loader_data_errors": (ctypes.c_char_p, [p]),
        "feedscope_loader_autotune": (ctypes.c_char_p, [p]),
        "feedscope_loader_sample_costs": (ctypes.c_char_p, [p]),
        "feedscope_loader_begin_epoch": (ctypes.c_int, [p, i64]),
        "feedscope_loader_next": (ctypes.c_int, [p, p, ctypes.POINTER(_Batch)]),
        "feedscope_loader_attach": (ctypes.c_int, [p, p]),
        "feedscope_dlpack_delete": (None, [p]),
        "feedscope_dltensor_name": (p, []),
        "feedscope_capsule_api": (ctypes.c_int, [p, p]),
    }
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(_lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    # The capsule's destructor is the library's own C function, which asks this interpreter's
    # PyCapsule_IsValid/GetPointer (given here) whether from_dlpack left the tensor behind.
    api = ctypes.pythonapi
    _lib.feedscope_capsule_api(ctypes.cast(api.PyCapsule_IsValid, p),
                               ctypes.cast(api.PyCapsule_GetPointer, p))
    api.PyCapsule_New.restype = ctypes.py_object
    api.PyCapsule_New.argtypes = [p, p, p]
    return api.PyCapsule_New, _lib.feedscope_dltensor_name(), ctypes.cast(
        _lib.feedscope_capsule_destructor, p)


_capsule_new, _DLTENSOR, _CAPSULE_DESTRUCTOR = _bind()

_open_loaders = weakref.WeakSet()


@atexit.register
def _close_open_loaders():
    """Joins every loader's workers before the interpreter tears down what they run beside."""
    for loader in list(_open_loaders):
        loader.close()


def _tensor(from_dlpack, managed):
    """A torch tensor that owns `managed` (a DLManagedTensor*): deleted with the tensor."""
    try:
        capsule = _capsule_new(managed, _DLTENSOR, _CAPSULE_DESTRUCTOR)
    except BaseException:
        _lib.feedscope_dlpack_delete(managed)
        raise
    return from_dlpack(capsule)  # a capsule it did not consume deletes the tensor itself


class _Iterator:
    """One epoch of a DataLoader. A newer iter() of the same loader ends this one."""

    __slots__ = ("_loader", "_generation", "_done", "epoch")

    def __init__(self, loader, generation, epoch):
        self._loader = loader
        self._generation = generation
        self._done = False
        self.epoch = epoch

    def __iter__(self):
        return self

    def __next__(self):
        if self._done:
            raise StopIteration
        if self._generation != self._loader._generation:
            raise FeedscopeError(
                f"feedscope.DataLoader: this iterator (epoch {self.epoch}) was replaced by a newer "
                "iter() of the same loader, which started another epoch: a loader runs one epoch "
                "at a time; make a second loader to iterate two at once")
        batch = self._loader._next()
        if batch is None:
            self._done = True
            raise StopIteration
        return batch


class DataLoader:
    """feedscope's loader: batches of (images, labels) as torch tensors.

    dataset: what `feedscope run --dataset` takes: "images:DIR" (torchvision's ImageFolder layout,
    every format it reads), "webdataset:PATTERN", "tfrecord:PATTERN", "records:DIR" or
    "synthetic:SHAPE". The other options are run's, under run's names (pipeline is run's
    image_pipeline); a bad one raises FeedscopeError naming it and what is allowed. Defaults are
    torch's DataLoader's where it has the option (batch_size=1, shuffle=False, num_workers=0,
    drop_last=False), run's otherwise.

    pin_memory: None pins the slabs when device is a GPU. device: "cpu", or "cuda"/"cuda:N": the
    batch arrives on the GPU, copied on feedscope's own stream and ordered before the work torch
    queues next on its current stream at next() (an event, no host sync); its buffer is reused after
    the work queued on that stream and on the default stream by the time its tensors die. A step on
    a side stream iterates inside `with torch.cuda.stream(s):`; a batch taken there may also be read
    on the default stream once it waited for s (docs/python-loader.md). rank/world_size: this process's
    DistributedSampler share (None: the whole dataset). max_held_batches: how many batches the
    loop may keep alive at once (a list of the last N) before the loader slows; the pool grows
    to make room, with a warning, and past it iterating raises FeedscopeError: a batch the loop
    holds is never written over.

    num_workers="auto" (and prefetch="auto"): the loader tunes itself while the loop runs, within
    max_workers (None or 0: the cores) and ram_budget_mib (None or 0: a quarter of the available
    memory), keeping a move only on a measured gain (docs/autotune.md). Each move is a line on
    stderr once judged (print_moves=False: none); `num_workers` is where it runs now, `autotune`
    the moves so far (report.json's autotune object).

    Iterating starts an epoch: the one set_epoch() named, else the one after the last. Each epoch
    of a shuffled loader has its own order, a function of (seed, epoch). The workers keep running
    between epochs; close() (or the end of the interpreter) stops them.
    """

    def __init__(self, dataset, batch_size=1, num_workers=0, pipeline="train", image_size=224,
                 shuffle=False, seed=0, drop_last=False, prefetch=2, pin_memory=None,
                 device="cpu", rank=None, world_size=None, bad_sample="fail", max_bad_ratio=0.01,
                 reduced_decode=True, shuffle_buffer=1000, label_key="cls", classes=None,
                 synthetic_samples=None, max_held_batches=16, max_workers=None,
                 ram_budget_mib=None, print_moves=True):
        self._handle = None
        device = self._device_name(device)
        options = {
            "dataset": os.fspath(dataset), "batch_size": batch_size, "num_workers": num_workers,
            "pipeline": pipeline, "image_size": image_size, "shuffle": shuffle, "seed": seed,
            "drop_last": drop_last, "prefetch": prefetch, "pin_memory": pin_memory,
            "device": device, "rank": 0 if rank is None else rank,
            "world_size": 1 if world_size is None else world_size, "bad_sample": bad_sample,
            "max_bad_ratio": max_bad_ratio, "reduced_decode": reduced_decode,
            "shuffle_buffer": shuffle_buffer, "label_key": label_key, "classes": classes,
            "synthetic_samples": synthetic_samples, "max_held_batches": max_held_batches,
            "max_workers": max_workers, "ram_budget_mib": ram_budget_mib,
        }
        try:
            text = json.dumps(options)
        except (TypeError, ValueError) as e:
            raise FeedscopeError(f"feedscope.DataLoader: an option is not a number, string or "
                                 f"bool: {e}") from None
        handle = _lib.feedscope_loader_create(text.encode())
        if not handle:  # the message names the key, "(from feedscope.DataLoader)"
            raise FeedscopeError(_lib.feedscope_last_error().decode(errors="replace"))
        self._handle = handle
        self._pid = os.getpid()
        self._info = json.loads(_lib.feedscope_loader_describe(handle).decode())
        self._epoch = 0
        self._generation = 0
        self._warned_growth = False
        self._max_held = max_held_batches
        self._from_dlpack = None
        self._stream_of = None
        self._watched = None  # under `feedscope watch`, unwrapped: a session of the loader's own
        self._step_begin, self._step_size = None, 0
        self.batch_size = int(batch_size)
        self._tuned = _lib.feedscope_loader_autotune(handle) != b"null"
        self._print_moves = bool(print_moves)
        self._next_moves_check = 0
        self._num_workers = None if self._tuned else int(num_workers)
        self.drop_last = bool(drop_last)
        self.dataset = options["dataset"]
        self.device = self._info["device"]
        self.pin_memory = bool(self._info["pin_memory"])
        # What torch's DataLoader calls them, for Session.wrap(): nothing is prefetched at 0
        # workers, and the workers persist between epochs. Tuned: where the loader starts.
        self.prefetch_factor = (self._autotune()["prefetch"] if prefetch == "auto" else int(prefetch)
                                ) if self.num_workers else None
        self.persistent_workers = True
        if self._info["pin_memory_note"]:
            warnings.warn(f"feedscope.DataLoader: {self._info['pin_memory_note']}", stacklevel=2)
        _open_loaders.add(self)

    @staticmethod
    def _device_name(device):
        """"cuda" is torch's current GPU, as in torch.device("cuda")."""
        device = str(device)
        if device == "cuda":
            import torch
            if torch.cuda.is_available():
                return f"cuda:{torch.cuda.current_device()}"
        return device

    # --- what ImageFolder and DataLoader tell ---------------------------------------------------
    def __len__(self):
        """Batches an epoch delivers (this rank's share, drop_last applied); a TypeError for shards,
        whose sample count is known only once they are read (as for torch's IterableDataset)."""
        batches = self._info["batches_per_epoch"]
        if batches is None:
            raise TypeError(f"len() of a feedscope.DataLoader over {self._info['dataset']}: "
                            "shards are streamed, their sample count is known only once read")
        return batches

    @property
    def classes(self):
        """The class names, sorted as ImageFolder sorts them (images:); the label numbers
        0..classes-1 for datasets that name none."""
        names = self._info["classes"]
        return list(names) if names is not None else list(range(self._info["num_classes"]))

    @property
    def class_to_idx(self):
        return {name: i for i, name in enumerate(self.classes)}

    @property
    def num_workers(self):
        """The worker count: as given, or under num_workers="auto" the one it runs at now."""
        if self._num_workers is not None:
            return self._num_workers
        return self._autotune()["num_workers"] if self._handle else 0

    @property
    def autotune(self):
        """None at fixed settings; under "auto", report.json's autotune object: {"moves": [{"t_s",
        "from", "to", "why", "before", "after", "kept"}], "final": {"num_workers", "prefetch"},
        "bounds"}, t_s counted from the loader's start."""
        if not self._tuned:
            return None
        self._check_open("autotune")
        return self._autotune()["autotune"]

    def _autotune(self):
        state = json.loads(_lib.feedscope_loader_autotune(self._handle).decode())
        if self._print_moves:
            for line in state["lines"]:
                print(line, file=sys.stderr, flush=True)
        return state

    @property
    def data_errors(self):
        """{"bad", "attempted", "examples": [{"index", "source", "message"}]}: the bad samples so far
        (bad_sample="skip" leaves them out of their batches and counts them here)."""
        self._check_open("data_errors")
        return json.loads(_lib.feedscope_loader_data_errors(self._handle).decode())

    def sample_costs(self):
        """Each sample's load time so far, as report.json's `samples`: count, load_ms (p50, p90, p99,
        max, the share of load time the slowest 1 % and 5 % took), slow (the samples at 4x the
        p90 or more), slowest (the 20 slowest files: file, ms, bytes, width, height, pixels,
        format) and the loop's wait on a batch's slowest sample. A wrapping Session reports the
        same, and its diagnosis names a few slow files that cost much of the loading."""
        self._check_open("sample_costs")
        return json.loads(_lib.feedscope_loader_sample_costs(self._handle).decode())

    def set_epoch(self, epoch):
        """The epoch the next iter() starts, as DistributedSampler.set_epoch: it seeds that
        epoch's order and augmentation."""
        epoch = int(epoch)
        if epoch < 0:
            raise FeedscopeError(f"set_epoch: {epoch} is negative; allowed: 0 or more")
        self._epoch = epoch

    # --- iterating ------------------------------------------------------------------------------
    def __iter__(self):
        self._check_open("iter")
        if self._watched is None and os.environ.get("FEEDSCOPE_WATCH_DIR"):
            self._watch_itself()
        self._generation += 1
        epoch, self._epoch = self._epoch, self._epoch + 1
        if _lib.feedscope_loader_begin_epoch(self._handle, epoch) != 0:
            raise _error("feedscope.DataLoader")
        return _Iterator(self, self._generation, epoch)

    def _next(self):
        self._check_open("next")
        if self._from_dlpack is None:
            self._bind_torch()
        stream = self._stream_of() if self._stream_of else None
        batch = _Batch()
        begin = _now()
        rc = _lib.feedscope_loader_next(self._handle, stream, ctypes.byref(batch))
        if self._watched:
            self._time_loop(begin, rc, batch.size)
        if self._tuned and begin >= self._next_moves_check:  # the moves judged, once a second
            self._next_moves_check = begin + 1_000_000_000
            self._autotune()
        if rc < 0:
            raise _error("feedscope.DataLoader")
        if rc == 0:
            return None
        try:
            images = _tensor(self._from_dlpack, batch.images)
        except BaseException:
            _lib.feedscope_dlpack_delete(batch.labels)
            raise
        labels = _tensor(self._from_dlpack, batch.labels)
        if batch.slabs > self._info["slabs"] or batch.device_buffers > self._info["device_buffers"]:
            self._warn_growth(batch)
        return images, labels

    def _bind_torch(self):
        import torch
        import torch.utils.dlpack
        self._from_dlpack = torch.utils.dlpack.from_dlpack
        if self.device.startswith("cuda"):
            device = torch.device(self.device)
            self._stream_of = lambda: torch.cuda.current_stream(device).cuda_stream

    def _warn_growth(self, batch):
        if self._warned_growth:
            return
        self._warned_growth = True
        mib = self._info["slab_bytes"] / 2**20
        where = (f"{batch.device_buffers} device buffers of {mib:.1f} MiB"
                 if batch.device_buffers > self._info["device_buffers"] else
                 f"{batch.slabs} slabs of {mib:.1f} MiB (from {self._info['slabs']})")
        warnings.warn(
            f"feedscope.DataLoader: the loop keeps batches alive, so the loader grew to {where}; "
            f"it makes room for up to max_held_batches={self._max_held}, then iterating raises "
            "FeedscopeError (a batch the loop holds is never written over). clone() the batches "
            "you keep to let their memory go back.", stacklevel=4)

    # --- profiled under `feedscope watch` ---------------------------------------------------------
    def _watch_itself(self):
        """A program under `feedscope watch` that iterates this loader without a Session of its
        own still gets the stages: the loader times the loop's waits and steps (the time between
        batches) in a session of its own, whose report reaches the watcher when the loader closes
        (at the latest when the interpreter exits)."""
        from . import Session
        report_dir = os.path.join(os.environ["FEEDSCOPE_WATCH_DIR"], f"loader-{os.getpid()}")
        try:
            self._watched = Session(report_dir, print=False, sample_hz=0, trace_gpu=False,
                                    device=self.device)
        except FeedscopeError as e:
            warnings.warn(f"feedscope.DataLoader: cannot report to feedscope watch: {e}")
            self._watched = False
            return
        self._feedscope_attach(self._watched._handle)
        settings = {"num_workers": self.num_workers, "batch_size": self.batch_size,
                    "pin_memory": self.pin_memory, "persistent_workers": True,
                    "prefetch_factor": self.prefetch_factor}
        _lib.feedscope_loader_settings(self._watched._handle, json.dumps(settings).encode())

    def _time_loop(self, begin, rc, size):
        """The wait for this batch, and the step on the last one: the loop's time between them."""
        handle = self._watched._handle
        if self._step_begin is not None:
            _lib.feedscope_step_done(handle, self._step_begin, begin, self._step_size)
        end = _now()
        _lib.feedscope_fetched(handle, begin, end, 1 if rc > 0 else 0)
        self._step_begin, self._step_size = (end, size) if rc > 0 else (None, 0)

    # --- the end --------------------------------------------------------------------------------
    def close(self):
        """Stops and joins the workers. Batches still alive stay valid. Idempotent; in a forked
        child it only forgets the parent's loader."""
        handle, self._handle = getattr(self, "_handle", None), None
        watched, self._watched = getattr(self, "_watched", None), False
        if watched and os.getpid() == self._pid:
            watched.close()  # finishes: the report goes to the watcher
        if handle:
            _lib.feedscope_loader_destroy(handle)
        _open_loaders.discard(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _check_open(self, what):
        if not self._handle:
            raise FeedscopeError(f"feedscope.DataLoader.{what}(): the loader is closed")

    def _feedscope_attach(self, session_handle):
        """Session.wrap(loader): from now on the workers' spans join the session's report."""
        self._check_open("wrap")
        if self._watched and session_handle != self._watched._handle:
            self._watched, watched = False, self._watched  # the program's own session reports
            watched.close()
        if _lib.feedscope_loader_attach(self._handle, session_handle) != 0:
            raise _error("Session.wrap(feedscope.DataLoader)")

    def __repr__(self):
        return (f"feedscope.DataLoader({self.dataset!r}, batch_size={self.batch_size}, "
                f"num_workers={self.num_workers}, device={self.device!r})")
