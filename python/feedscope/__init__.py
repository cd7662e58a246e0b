"""feedscope in a PyTorch training loop: where the input pipeline holds training back, and
feedscope's own loader (feedscope.DataLoader, in loader.py) for when it is the input.

    import feedscope
    fs = feedscope.Session(report_dir="my-report", warmup=5)
    for x, y in fs.wrap(loader):          # each wait for the next batch is the `wait` stage
        with fs.step(len(x)):             # the step: forward, backward, optimizer
            ...
    fs.finish()                           # writes the reports, prints the verdict

The same report files, schema and diagnosis as `feedscope run` and the C++ feedscope::Session,
which this drives through feedscope's C ABI (libfeedscope.so, loaded with ctypes): no compiled
dependency on torch or on one CPython, so it works with any torch the program imports.
"""

import contextlib
import ctypes
import json
import os
import time

__all__ = ["Session", "DataLoader", "FeedscopeError", "library_path", "__version__"]


def _installed_version():
    """The version in this package's own metadata (its wheel's or the .deb's); None where it runs
    from a build folder (PYTHONPATH=build/python), which has none."""
    try:
        from importlib import metadata
        dist = metadata.distribution("feedscope")
    except Exception:  # PackageNotFoundError, or no importlib.metadata
        return None
    here = os.path.abspath(__file__)
    if os.path.abspath(str(dist.locate_file("feedscope/__init__.py"))) != here:
        return None  # another feedscope's metadata, not this copy's
    return dist.version


__version__ = _installed_version()

_ABI_VERSION = 5  # include/feedscope/feedscope_c.h's FEEDSCOPE_C_ABI_VERSION


class FeedscopeError(RuntimeError):
    """Bad use of the API, or a failure of feedscope's (a report directory it cannot write)."""


def library_path():
    """Where libfeedscope.so is taken from: $FEEDSCOPE_LIBRARY, else beside this file."""
    return os.environ.get("FEEDSCOPE_LIBRARY") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "libfeedscope.so")


def _load():
    path = library_path()
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise ImportError(
            f"feedscope: cannot load {path}: {e}. Build it first (./scripts/build.sh puts it in "
            "build/python/feedscope/), or point FEEDSCOPE_LIBRARY at it.") from e
    # The version first: a library of another version may lack a function bound below.
    lib.feedscope_abi_version.restype, lib.feedscope_abi_version.argtypes = ctypes.c_int, []
    if lib.feedscope_abi_version() != _ABI_VERSION:
        raise ImportError(f"feedscope: {path} has C ABI version {lib.feedscope_abi_version()}, "
                          f"this package needs {_ABI_VERSION}: build both from one checkout")
    i64, p = ctypes.c_int64, ctypes.c_void_p
    sigs = {
        "feedscope_last_error": (ctypes.c_char_p, []),
        "feedscope_now_ns": (i64, []),
        "feedscope_session_create": (p, [ctypes.c_char_p]),
        "feedscope_session_destroy": (None, [p]),
        "feedscope_loader_settings": (ctypes.c_int, [p, ctypes.c_char_p]),
        "feedscope_fetched": (ctypes.c_int, [p, i64, i64, ctypes.c_int]),
        "feedscope_step_done": (ctypes.c_int, [p, i64, i64, i64]),
        "feedscope_stage_id": (ctypes.c_int, [p, ctypes.c_char_p]),
        "feedscope_stage_done": (ctypes.c_int, [p, ctypes.c_int, i64, i64]),
        "feedscope_finish": (ctypes.c_char_p, [p]),
        "feedscope_metrics_address": (ctypes.c_char_p, [p]),
    }
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


_lib = _load()


def _error(what):
    return FeedscopeError(f"{what}: {_lib.feedscope_last_error().decode(errors='replace')}")


def _loader_settings(loader):
    """The settings of a torch DataLoader, as far as it has them; {} for anything else.

    Duck-typed, so feedscope never imports torch: a DataLoader is what has num_workers, batch_size
    and pin_memory. A value of an unexpected type (a look-alike's) is left out, not sent.
    """
    if not all(hasattr(loader, a) for a in ("num_workers", "batch_size", "pin_memory")):
        return {}
    batch_size = loader.batch_size
    if batch_size is None:  # a batch_sampler of the user's; a batch_size-less one says nothing
        batch_size = getattr(getattr(loader, "batch_sampler", None), "batch_size", None)
    num_workers = loader.num_workers
    read = {
        "num_workers": num_workers,
        "batch_size": batch_size,
        "pin_memory": loader.pin_memory,
        # Without workers nothing is prefetched: torch 1.13 still says 2, torch 2.x None.
        "prefetch_factor": getattr(loader, "prefetch_factor", None) if num_workers else None,
        "persistent_workers": getattr(loader, "persistent_workers", None),
    }

    def well_typed(key, value):
        if key in ("pin_memory", "persistent_workers"):
            return isinstance(value, bool)
        return isinstance(value, int) and not isinstance(value, bool)

    return {k: v for k, v in read.items() if well_typed(k, v)}


# The spans' clock: CLOCK_MONOTONIC, the clock of the C++ side's std::chrono::steady_clock.
_now = time.monotonic_ns


class _Step:
    """Times the `with` block as the loop's step."""

    __slots__ = ("_session", "_samples", "_begin")

    def __init__(self, session, samples):
        self._session = session
        self._samples = samples

    def __enter__(self):
        self._session._enter_step()
        self._begin = _now()
        return self

    def __exit__(self, *exc):
        end = _now()
        s = self._session
        s._in_step = False
        if _lib.feedscope_step_done(s._handle, self._begin, end, self._samples) != 0:
            raise _error("step")
        return False


class _Scope:
    """Times the `with` block as a stage of the user's own ("augment", "loss")."""

    __slots__ = ("_session", "_id", "_begin")

    def __init__(self, session, stage_id):
        self._session = session
        self._id = stage_id

    def __enter__(self):
        self._begin = _now()
        return self

    def __exit__(self, *exc):
        end = _now()
        if _lib.feedscope_stage_done(self._session._handle, self._id, self._begin, end) != 0:
            raise _error("scope")
        return False


class Session:
    """Profiles a training loop you already have, without replacing its loader.

    Options are those of the C++ feedscope::Session (include/feedscope/session.h): report_dir, warmup
    (batches left out of the measured window), metrics_addr (HOST:PORT of a Prometheus endpoint),
    rank, host, sample_hz, timeseries_max_mib, device ("cpu", "cuda:0"; empty: a GPU trace with
    kernels means the GPU), print (the verdict on stderr at finish), trace_gpu, gpu_trace
    ("whole", or "W/P": the device's records W s of every P after gpu_trace_lead s; default
    "1/10" after 5 s), gpu_trace_lead, trace_max_spans,
    and your loader's num_workers, batch_size, pin_memory, prefetch_factor, persistent_workers.
    wrap() reads those five from a torch DataLoader itself; one you pass here wins over what it
    reads (give them for a loader wrap() cannot read, such as a generator over a pool of yours).

    One thread records: the one that iterates the wrapped loader.
    """

    def __init__(self, report_dir="feedscope-report", **options):
        # The loader settings wrap() must not replace (None: not given).
        self._explicit = frozenset(k for k, v in options.items() if v is not None)
        options["report_dir"] = os.fspath(report_dir)
        handle = _lib.feedscope_session_create(json.dumps(options).encode())
        if not handle:
            raise _error("feedscope.Session")
        self._handle = handle
        self._report = None
        self._loops = 0  # wrapped iterations under way (a loop left by `break` ends when freed)
        self._in_step = False
        self._stages = {}

    # --- the loop ---------------------------------------------------------------------------
    def wrap(self, iterable):
        """Iterates `iterable`, timing each wait for the next item as the `wait` stage.

        A torch DataLoader tells the session its num_workers, batch_size (its batch_sampler's when
        batch_size is None), pin_memory, prefetch_factor and persistent_workers, for the diagnosis
        and report.json's config; the ones you passed to Session() yourself win. Any other iterable
        (a list, a generator) tells nothing: what you did not pass is "not known" in the report.
        """
        self._check_open("wrap")
        attach = getattr(iterable, "_feedscope_attach", None)
        if attach is not None:  # a feedscope.DataLoader: its workers' spans join the report
            attach(self._handle)
        settings = {k: v for k, v in _loader_settings(iterable).items() if k not in self._explicit}
        if settings and _lib.feedscope_loader_settings(
                self._handle, json.dumps(settings).encode()) != 0:
            raise _error("wrap: the loader's settings")
        return self._wrapped(iter(iterable))

    def _wrapped(self, it):
        handle = _lib.feedscope_fetched
        self._loops += 1
        try:
            while True:
                begin = _now()
                try:
                    item = next(it)
                except StopIteration:
                    handle(self._handle, begin, _now(), 0)
                    return
                if handle(self._handle, begin, _now(), 1) != 0:
                    raise _error("wrap")
                yield item
        finally:
            self._loops -= 1

    def step(self, samples=0):
        """`with fs.step(len(x)):` times the block as the step of the current batch."""
        return _Step(self, int(samples))

    def _enter_step(self):
        self._check_open("step")
        if self._loops == 0:
            raise FeedscopeError("step() outside a loop wrapped by Session.wrap(): "
                                 "write `for batch in fs.wrap(loader): with fs.step(n): ...`")
        if self._in_step:
            raise FeedscopeError("step() inside another step: steps do not nest")
        self._in_step = True

    def scope(self, name):
        """`with fs.scope("augment"):` times the block as a stage of your own."""
        self._check_open("scope")
        stage_id = self._stages.get(name)
        if stage_id is None:
            stage_id = _lib.feedscope_stage_id(self._handle, str(name).encode())
            if stage_id < 0:
                raise _error(f"scope({name!r})")
            self._stages[name] = stage_id
        return _Scope(self, stage_id)

    # --- the end ----------------------------------------------------------------------------
    def finish(self):
        """Writes report.json, report.html, trace.json, timeseries.csv; returns the report."""
        if self._report is not None:
            raise FeedscopeError("finish() was called already; the report is Session.report")
        text = _lib.feedscope_finish(self._handle)
        if text is None:
            raise _error("finish")
        self._report = json.loads(text.decode())
        return self._report

    @property
    def report(self):
        """The report as a dict, once finish() ran; None before."""
        return self._report

    @property
    def metrics_address(self):
        """"127.0.0.1:9464", the endpoint's bound address; "" without one."""
        return _lib.feedscope_metrics_address(self._handle).decode()

    def close(self):
        """Frees the native session (finishing it first if finish() was not called). In a forked
        child (a DataLoader worker's copy of this object) it only forgets the copy."""
        handle, self._handle = getattr(self, "_handle", None), None
        if handle:
            _lib.feedscope_session_destroy(handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            if self._report is None and self._handle:
                self.finish()
        finally:
            self.close()
        return False

    def __del__(self):
        with contextlib.suppress(Exception):
            self.close()

    def _check_open(self, what):
        if not self._handle:
            raise FeedscopeError(f"{what}(): the session is closed")
        if self._report is not None:
            raise FeedscopeError(f"{what}(): the session is finished")


from .loader import DataLoader  # noqa: E402  (it uses _lib and _error above)
