"""The one way every benchmark times a run: in this process (:func:`timed`,
:func:`timed_train`) or in a child process of its own, with its peak RSS (:func:`run_child`).

In this process the clock is ``time.perf_counter`` around the call alone. A child is started
from a tiny wrapper interpreter (``python -S``), never forked from the harness: a child's
``ru_maxrss`` also counts the memory of the process it was forked from before ``exec``
(Linux keeps the old mm's high-water mark). The wrapper reports ``RUSAGE_CHILDREN`` (its only
child: that process's own peak RSS and CPU seconds) and the child's wall time from spawn to
exit, and samples the child's ``/proc/PID/status`` every 20 ms, keeping the split of the
largest sampled RSS into anonymous memory (``RssAnon``: the heap, arrays) and file-backed
pages (``RssFile``: mapped shared libraries, above all numba's LLVM, whose resident share
depends on what of the library file the page cache holds). It also reports the bytes the child
read from and wrote to the block devices (``ru_inblock``/``ru_oublock``, Linux's 512-byte
units: the ``read_bytes``/``write_bytes`` of ``/proc/PID/io``, page-cache hits not counted),
and can start the child inside a memory cgroup (:mod:`.cgroup`).
"""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import sys
import time
import warnings

from ._common import MB, ROOT

__all__ = ["timed", "timed_train", "Clock", "run_child", "maxrss_bytes", "tail"]


def timed(fn, repeat: int = 1, repeat_under: float = math.inf, *, warm: bool = False):
    """Run ``fn`` once (after one untimed call if ``warm``), then up to ``repeat - 1`` more
    times if that first timed call took less than ``repeat_under`` seconds.

    Returns the first timed call's result and the list of wall times.
    """
    if warm:
        fn()
    times, first = [], None
    for r in range(max(1, repeat)):
        t0 = time.perf_counter()
        res = fn()
        times.append(time.perf_counter() - t0)
        if r == 0:
            first = res
            if times[0] >= repeat_under:
                break
    return first, times


def timed_train(store, *, quiet=None, **kw):
    """``streamsvm._train.train(store, **kw)`` with warnings of the ``quiet`` categories
    ignored (default: ``ConvergenceWarning``; ``Warning``: every warning); returns
    ``(model, result, seconds)``, the seconds those of the call alone."""
    from streamsvm._train import train
    from streamsvm.exceptions import ConvergenceWarning
    with warnings.catch_warnings():
        for category in quiet or (ConvergenceWarning,):
            warnings.simplefilter("ignore", category)
        t0 = time.perf_counter()
        model, res = train(store, **kw)
        return model, res, time.perf_counter() - t0


class Clock:
    """``with Clock() as c:`` — the block's wall seconds (``c.seconds``, ``perf_counter``) and
    this process's CPU seconds (``c.cpu``, ``process_time``: every thread)."""

    def __enter__(self):
        self.t0, self.c0 = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.t0
        self.cpu = time.process_time() - self.c0


def maxrss_bytes(ru_maxrss: int, system: str | None = None) -> int:
    """``ru_maxrss`` in bytes (Linux and the BSDs report KiB, macOS bytes)."""
    return int(ru_maxrss) * (1 if (system or platform.system()) == "Darwin" else 1024)


#: The wrapper of every measured child process (module doc).
_WRAPPER = r"""
import os, sys, json, time, resource, subprocess, threading
report, argv = sys.argv[1], sys.argv[2:]
procs = os.environ.pop("BENCH_CGROUP_PROCS", None)
def enter():            # in the child, before exec: it runs in the cgroup from its start
    with open(procs, "w") as f:
        f.write(str(os.getpid()))
t_spawn = time.time()
t0 = time.perf_counter()
proc = subprocess.Popen(argv, preexec_fn=enter if procs else None)
peak = {"VmRSS": 0}
def sample():
    path = "/proc/%d/status" % proc.pid
    while proc.returncode is None:
        try:
            with open(path) as f:
                d = {k: int(v.split()[0]) * 1024 for k, _, v in
                     (line.partition(":") for line in f) if k in ("VmRSS", "RssAnon", "RssFile")}
            if d.get("VmRSS", 0) > peak["VmRSS"]:
                peak.update(d)
        except (OSError, ValueError):
            pass
        time.sleep(0.02)
th = threading.Thread(target=sample, daemon=True)
th.start()
rc = proc.wait()
wall = time.perf_counter() - t0
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(report, "w") as f:
    json.dump({"rc": rc, "wall_s": wall, "t_spawn": t_spawn, "ru_maxrss": ru.ru_maxrss,
               "user_s": ru.ru_utime, "sys_s": ru.ru_stime,
               "read_bytes": ru.ru_inblock * 512, "write_bytes": ru.ru_oublock * 512,
               "sampled_rss": peak.get("VmRSS") or None, "sampled_anon": peak.get("RssAnon"),
               "sampled_file": peak.get("RssFile")}, f)
"""


def run_child(argv, *, timeout: float | None, stdout_path: str, stderr_path: str, cwd=ROOT,
              env=None, cgroup: str | None = None) -> dict:
    """Run ``argv`` through the wrapper (module doc), its output into the two files; return
    its exit code, wall time, own peak RSS (MB = 10^6 bytes), CPU seconds, the sampled RSS
    and its split, the bytes it read from and wrote to disk, and whether it was killed after
    ``timeout`` seconds (None: no limit). ``cgroup``: the directory of a cgroup the child
    joins before it runs (the wrapper stays outside). When the wrapper wrote no report
    (killed, or it failed), ``wall_s`` is None."""
    import signal
    env = dict(os.environ if env is None else env)
    env.setdefault("PYTHONUNBUFFERED", "1")
    if cgroup is not None:
        env["BENCH_CGROUP_PROCS"] = os.path.join(cgroup, "cgroup.procs")
    report = stdout_path + ".rusage.json"
    if os.path.exists(report):
        os.remove(report)
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-S", "-c", _WRAPPER, report, *argv],
                                stdout=out, stderr=err, cwd=cwd, env=env,
                                start_new_session=True)
        try:
            proc.wait(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
            try:       # the wrapper and the measured child: one process group we started
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait()
    try:
        with open(report) as f:
            r = json.load(f)
    except (OSError, ValueError):
        return {"rc": proc.returncode, "wall_s": None, "t_spawn": None, "peak_rss_mb": None,
                "user_s": None, "sys_s": None, "timed_out": timed_out}
    mb = (lambda v: v / MB if v else None)  # noqa: E731
    return {"rc": r["rc"], "wall_s": r["wall_s"], "t_spawn": r["t_spawn"],
            "peak_rss_mb": maxrss_bytes(r["ru_maxrss"]) / MB, "user_s": r["user_s"],
            "sys_s": r["sys_s"], "timed_out": timed_out,
            "read_bytes": r.get("read_bytes"), "write_bytes": r.get("write_bytes"),
            # the largest sampled RSS and its split (sampling can miss a short peak)
            "sampled_peak_rss_mb": mb(r.get("sampled_rss")),
            "peak_rss_anon_mb": mb(r.get("sampled_anon")),
            "peak_rss_file_mb": mb(r.get("sampled_file"))}


def tail(path: str, n: int = 1500) -> str:
    """The last ``n`` bytes of a file as text ("" if it cannot be read)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - n))
            return f.read().decode(errors="replace")
    except OSError:
        return ""
