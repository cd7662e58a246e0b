"""feedscope in a PyTorch training loop: where the input pipeline holds training back.

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

__all__ = ["Session", "FeedscopeError", "library_path"]

_ABI_VERSION = 1


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
    i64, p = ctypes.c_int64, ctypes.c_void_p
    sigs = {
        "feedscope_abi_version": (ctypes.c_int, []),
        "feedscope_last_error": (ctypes.c_char_p, []),
        "feedscope_now_ns": (i64, []),
        "feedscope_session_create": (p, [ctypes.c_char_p]),
        "feedscope_session_destroy": (None, [p]),
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
    if lib.feedscope_abi_version() != _ABI_VERSION:
        raise ImportError(f"feedscope: {path} has C ABI version {lib.feedscope_abi_version()}, "
                          f"this package needs {_ABI_VERSION}")
    return lib


_lib = _load()


def _error(what):
    return FeedscopeError(f"{what}: {_lib.feedscope_last_error().decode(errors='replace')}")


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

    Options are those of the C++ feedscope::Session (exporters/session.h): report_dir, warmup
    (batches left out of the measured window), metrics_addr (HOST:PORT of a Prometheus endpoint),
    rank, host, sample_hz, timeseries_max_mib, batch_size and num_workers (of your loader, for
    the recommendations), device ("cpu", "cuda:0"; empty: a GPU trace with kernels means the
    GPU), print (the verdict on stderr at finish), trace_gpu, trace_max_spans.

    One thread records: the one that iterates the wrapped loader.
    """

    def __init__(self, report_dir="feedscope-report", **options):
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
        """Iterates `iterable`, timing each wait for the next item as the `wait` stage."""
        self._check_open("wrap")
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
