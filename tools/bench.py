#!/usr/bin/env python
"""Solver benchmark: every streamsvm solver against LIBLINEAR, scikit-learn and Vowpal Wabbit.

One run measures a matrix of (data set × method × C × loss) on the same data, and writes a JSON
results file, Markdown tables and PNG plots::

    python tools/bench.py --suite quick          # < 10 min on 2 cores
    python tools/bench.py --suite dcd            # issue 3: dcd vs LIBLINEAR; 2 GB store out of core
    python tools/bench.py --suite full           # everything (hours)
    python tools/bench.py --io-baseline STORE    # time to read + decompress a store once
    python tools/bench.py --checks-cost STORE    # what the store's integrity checks cost a pass
    python tools/bench.py --memory-bound STORE --memory 200MB   # each solver's peak RSS
    python tools/bench.py --scheduler STORE      # passes/s on a dask LocalCluster of 1 and 2
    python tools/bench.py --render bench-out/quick/results.json   # tables and plots again

Methods
    * every solver in ``streamsvm.solvers.SOLVERS`` (the registry, not a list kept here), trained
      by ``streamsvm.estimators.train`` with C, loss, tol, max_passes and bias = 1; a solver
      that rejects those parameters (``InvalidParameterError``) is reported "unsupported";
    * LIBLINEAR (``liblinear-official``): ``-s 3`` (hinge, dual CD), ``-s 1`` (squared hinge,
      dual CD), ``-s 2`` (squared hinge, primal Newton) with ``-B 1`` and a ladder of ``-e``
      (each step a separate fit; the default ``-e`` is the headline, and "to 1e-3" is the first
      step whose objective is within 1e-3 of the best known); ``-s 4`` (Crammer–Singer) on
      multiclass data, accuracy and time only (another objective);
    * scikit-learn ``LinearSVC`` (liblinear inside, ``intercept_scaling=1``: the same objective)
      and ``SGDClassifier(loss="hinge")`` trained by ``partial_fit`` over the store's chunks for
      a number of epochs, ``alpha = 1/(C·n)`` (sklearn minimizes (1/n)Σ loss + α/2‖w‖²; times
      C·n this is our objective, except that sklearn does not regularize its intercept — the
      objective here is still evaluated with ½b², b = intercept, since B = 1);
    * Vowpal Wabbit (``vowpalwabbit``): ``--loss_function hinge --l2 λ`` with ``λ = 1/(C·n)``
      (VW's per-example objective loss_i + λ/2‖w‖² averaged over n, times C·n), ``--passes P``
      from a binary cache (``--cache_file``, made once before timing), ``--holdout_off``;
      weights read from ``--readable_model`` (times VW's ``l2_state`` contraction) and graded
      like everybody else; multiclass (``--oaa k``): accuracy only.

Per run: fit seconds (in-process, around the fitting call only; fastest of up to ``--repeat``
fits when the first takes less than ``--repeat-under`` s), whole-process seconds (streamsvm: the
``streamsvm train`` CLI measured from spawn to exit; the others: the worker's start-up + data
loading + the fit), peak RSS of that process (``wait4`` rusage), passes over the data, the
primal objective ``Σ_c ½‖w_c‖² + ½b_c² + C Σ loss`` computed here from each method's weights
on the same data (``tools/_bench_eval.py``), its relative gap to the best objective found for
(data set, C, loss), train and test accuracy. Curves of the relative objective gap against
passes and seconds: streamsvm re-run with ``max_passes`` = 1, 2, 4, ... (true objective of each
returned model) on data that fits in memory, or the solver's own certificate per sweep
(callback; approximate primal, exact at the marked checks) out of core; LIBLINEAR's ``-e``
ladder; SGD after every epoch; VW over its ``--passes`` ladder.

Every number in the tables and plots comes from the JSON this script writes; the JSON also holds
seeds, package versions, CPU model and core count.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from tools._machine import machine_info  # noqa: E402
from tools._bench_methods import solver_params, trains  # noqa: E402
from tools._bench_eval import (ObjectiveAccumulator, best_objective, first_within,  # noqa: E402
                               rel_gap)

__all__ = ["SUITES", "SCHEMA", "main", "plan_methods", "solver_supported", "streamsvm_solvers",
           "finalize_groups", "validate_results", "run_child", "io_baseline", "maxrss_bytes",
           "checks_cost", "checks_table",
           "dataset_spec", "libsvm_to_vw", "split_tail"]

SCHEMA = "streamsvm-bench/1"
MB = 1e6
SHARED = os.environ.get("STREAMSVM_SHARED", os.path.join(os.path.dirname(ROOT), "shared"))
TARGET_GAP = 1e-3

#: The real data sets in ../shared/datasets (train file, test file or None).
REAL = {
    "a9a": ("a9a/a9a", "a9a/a9a.t"),
    "mushrooms": ("mushrooms/mushrooms", None),
    "dna": ("dna/dna.scale", "dna/dna.scale.t"),
    "letter": ("letter/letter.scale", "letter/letter.scale.t"),
    "pendigits": ("pendigits/pendigits", "pendigits/pendigits.t"),
    "usps": ("usps/usps.t", None),
    "vowel": ("vowel/vowel.scale", None),
}
#: Shape of the synthetic data (tools/make_synthetic.py): ~24.5 non-zeros per row after
#: de-duplication, so 10^7 rows decode to ~2.1 GB (int32 indices + float32 values).
SYNTH = dict(features=100_000, nnz_per_row=30, classes=2, noise=0.05, zipf=1.1, seed=0)
SYNTH_TEST_ROWS = 20_000

SUITES = {
    "quick": dict(
        datasets=list(REAL) + ["synth-1e5"], Cs=[1.0],
        binary_losses=["hinge", "squared_hinge"],
        multiclass_losses=["hinge", "squared_hinge", "ww"],
        methods=None, repeat=3, repeat_under=2.0, tol=1e-3, max_passes=200,
        eps_dual=[0.1, 0.01, 0.001, 1e-4], eps_primal=[0.1, 0.01, 0.001, 1e-4],
        sgd_epochs=10, vw_passes=[1, 2, 4, 8, 16], reference_tol=1e-5, ladder_budget=15.0,
        timeout=300, ooc_rows=None),
    "full": dict(
        datasets=list(REAL) + ["synth-1e5", "synth-1e6", "synth-1e7"], Cs=[0.1, 1.0, 10.0],
        binary_losses=["hinge", "squared_hinge"],
        multiclass_losses=["hinge", "squared_hinge", "ww"],
        methods=None, repeat=3, repeat_under=2.0, tol=1e-3, max_passes=500,
        eps_dual=[0.1, 0.01, 0.001, 1e-4, 1e-5], eps_primal=[0.1, 0.01, 0.001, 1e-4, 1e-5],
        sgd_epochs=20, vw_passes=[1, 2, 4, 8, 16, 32], reference_tol=1e-5, ladder_budget=600.0,
        timeout=7200, ooc_rows=10**7),
    "dcd": dict(
        datasets=["a9a", "mushrooms", "synth-1e7"], Cs=[1.0],
        binary_losses=["hinge", "squared_hinge"], multiclass_losses=["hinge"],
        methods=["streamsvm-dcd", "liblinear-s3", "liblinear-s1", "sklearn-sgd", "vw"],
        repeat=9, repeat_under=2.0, tol=1e-3, max_passes=200,
        eps_dual=[0.1, 0.01, 0.001, 1e-4, 1e-5], eps_primal=[0.1, 0.01, 0.001, 1e-4],
        sgd_epochs=10, vw_passes=[1, 2, 4, 8, 16], reference_tol=1e-6, ladder_budget=60.0,
        timeout=3600, ooc_rows=10**7, ooc_losses=["hinge"]),
}
#: Out-of-core settings (data sets with at least ``ooc_rows`` rows).
OOC = dict(budget_fraction=0.125, sgd_epochs=3, vw_passes=[1, 3], repeat=1)

IN_MEMORY_METHODS = ("liblinear", "linearsvc")


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# =============================================================================================
# machine, versions
# =============================================================================================

def _version(dist: str):
    from importlib import metadata
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def maxrss_bytes(ru_maxrss: int, system: str | None = None) -> int:
    """``ru_maxrss`` in bytes (Linux reports KiB, macOS bytes)."""
    return int(ru_maxrss) * (1 if (system or platform.system()) == "Darwin" else 1024)


def versions() -> dict:
    out = {d: _version(d) for d in ("streamsvm", "numpy", "scipy", "numba", "zarr", "numcodecs",
                                    "scikit-learn", "liblinear-official", "vowpalwabbit",
                                    "matplotlib", "psutil", "fsspec")}
    try:
        import vowpalwabbit  # noqa: F401
        out["vowpalwabbit_importable"] = True
    except Exception as exc:  # noqa: BLE001
        out["vowpalwabbit_importable"] = f"{type(exc).__name__}: {exc}"
    out["commit"] = _commit()
    out["streamsvm_source_sha256"] = source_digest()
    return out


def source_digest() -> str:
    """sha256 over streamsvm/**/*.py (the working tree may differ from the commit)."""
    import hashlib
    h = hashlib.sha256()
    base = os.path.join(ROOT, "streamsvm")
    for dirpath, dirnames, files in sorted(os.walk(base)):
        dirnames.sort()
        for fn in sorted(files):
            if fn.endswith(".py"):
                p = os.path.join(dirpath, fn)
                h.update(os.path.relpath(p, base).encode())
                with open(p, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()


def _commit():
    """The checked-out commit, read from .git (no git command is run)."""
    try:
        with open(os.path.join(ROOT, ".git", "HEAD")) as f:
            head = f.read().strip()
        if head.startswith("ref: "):
            ref = os.path.join(ROOT, ".git", head[5:])
            if os.path.exists(ref):
                with open(ref) as f:
                    return f.read().strip()
            with open(os.path.join(ROOT, ".git", "packed-refs")) as f:
                for line in f:
                    if line.strip().endswith(head[5:]):
                        return line.split()[0]
            return None
        return head
    except OSError:
        return None


# =============================================================================================
# child processes
# =============================================================================================

#: A tiny parent for every measured process: a child's ``ru_maxrss`` also counts the memory
#: of the process it was forked from before ``exec`` (Linux keeps the old mm's high-water
#: mark), so children are started from this small interpreter, not from the harness, and
#: it reports ``RUSAGE_CHILDREN`` (its only child) and the child's wall time. It also
#: samples the child's ``/proc/PID/status`` every 20 ms and keeps the split of the largest
#: sampled RSS into anonymous memory (``RssAnon``: the heap, arrays) and file-backed pages
#: (``RssFile``: mapped shared libraries, above all numba's LLVM, whose resident share
#: depends on what of the library file the page cache holds).
_WRAPPER = r"""
import os, sys, json, time, resource, subprocess, threading
report, argv = sys.argv[1], sys.argv[2:]
t_spawn = time.time()
t0 = time.perf_counter()
proc = subprocess.Popen(argv)
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
               "sampled_rss": peak.get("VmRSS") or None, "sampled_anon": peak.get("RssAnon"),
               "sampled_file": peak.get("RssFile")}, f)
"""


def run_child(argv, *, timeout: float, stdout_path: str, stderr_path: str, cwd=ROOT,
              env=None) -> dict:
    """Run ``argv`` (through :data:`_WRAPPER`); return its wall time, exit code, own peak RSS."""
    import signal
    env = dict(os.environ if env is None else env)
    env.setdefault("PYTHONUNBUFFERED", "1")
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
            # the largest sampled RSS and its split (sampling can miss a short peak)
            "sampled_peak_rss_mb": mb(r.get("sampled_rss")),
            "peak_rss_anon_mb": mb(r.get("sampled_anon")),
            "peak_rss_file_mb": mb(r.get("sampled_file"))}


def _tail(path: str, n: int = 1500) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - n))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


# =============================================================================================
# data
# =============================================================================================

def synth_rows(name: str) -> int | None:
    """Rows of a synthetic data set name ``synth-1e6`` / ``synth-250000`` /
    ``synth-1e6-f2e6``; None if not one."""
    if not name.startswith("synth-"):
        return None
    return int(float(name[len("synth-"):].partition("-f")[0]))


def synth_features(name: str) -> int:
    """Features of a synthetic data set: ``synth-<rows>-f<features>`` (text-like sets with
    more features than rows), else the default ``SYNTH["features"]``."""
    _, sep, f = name[len("synth-"):].partition("-f")
    return int(float(f)) if sep else SYNTH["features"]


def dataset_spec(name: str, cfg: dict) -> dict:
    """Static description of a data set (paths are filled in by :func:`prepare_dataset`)."""
    rows = synth_rows(name)
    if rows is not None:
        ooc = cfg.get("ooc_rows") is not None and rows >= cfg["ooc_rows"]
        return {"name": name, "kind": "synthetic", "rows": rows, "ooc": ooc,
                "synthetic": dict(SYNTH, nnz_per_row=cfg.get("synthetic_nnz", SYNTH["nnz_per_row"]),
                                  features=synth_features(name), test_rows=SYNTH_TEST_ROWS)}
    if name not in REAL:
        raise SystemExit(f"bench.py: unknown data set {name!r}; known: {', '.join(REAL)}, "
                         f"synth-<rows>")
    train, test = REAL[name]
    base = os.path.join(SHARED, "datasets")
    return {"name": name, "kind": "real", "ooc": False,
            "train_text": os.path.join(base, train),
            "test_text": os.path.join(base, test) if test else None}


def split_tail(path: str, n_tail: int, tail_path: str) -> int:
    """Move the last ``n_tail`` lines of ``path`` into ``tail_path`` (truncating ``path``).

    Returns the byte offset where the tail started.
    """
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        pos, count, block = size, 0, 1 << 20
        # the file ends with '\n': the (n_tail + 1)-th newline from the end starts the tail
        while pos > 0:
            step = min(block, pos)
            pos -= step
            f.seek(pos)
            buf = f.read(step)
            for i in range(len(buf) - 1, -1, -1):
                if buf[i] == 10:
                    count += 1
                    if count == n_tail + 1:
                        start = pos + i + 1
                        break
            else:
                continue
            break
        else:
            start = 0
        f.seek(start)
        with open(tail_path + ".partial", "wb") as out:
            shutil.copyfileobj(f, out, 1 << 22)
    os.replace(tail_path + ".partial", tail_path)
    os.truncate(path, start)
    return start


def libsvm_to_vw(src: str, dst: str, classes, task: str, shuffle_seed=None,
                 max_shuffle_bytes: int = 1 << 29) -> int:
    """Write VW text: ``label | idx:val ...`` (1-based libsvm indices as VW feature names).

    Binary labels become ``1`` (the larger original label) and ``-1``; multiclass labels the
    class index + 1 (``--oaa``). Files under ``max_shuffle_bytes`` are shuffled with
    ``shuffle_seed`` (the store is shuffled at conversion; VW and SGD learn online, so they
    should not see a sorted file); larger files (the synthetic ones, i.i.d. rows) keep their
    order. Returns the number of rows written.
    """
    keys = {}
    for i, c in enumerate(classes):
        lab = ("1" if i == len(classes) - 1 else "-1") if task == "binary" else str(i + 1)
        keys[float(c)] = lab.encode()
    shuffle = shuffle_seed is not None and os.path.getsize(src) <= max_shuffle_bytes
    n = 0
    with open(src, "rb") as f, open(dst + ".partial", "wb") as out:
        if shuffle:
            lines = [ln for ln in f.read().split(b"\n") if ln.strip()]
            random.Random(shuffle_seed).shuffle(lines)
            it = iter(lines)
        else:
            it = (ln.rstrip(b"\n") for ln in f)
        buf = []
        for line in it:
            if not line.strip():
                continue
            head, _, rest = line.partition(b" ")
            buf.append(keys[float(head)] + b" | " + rest.strip())
            n += 1
            if len(buf) >= 65536:
                out.write(b"\n".join(buf) + b"\n")
                buf.clear()
        if buf:
            out.write(b"\n".join(buf) + b"\n")
    os.replace(dst + ".partial", dst)
    return n


def prepare_dataset(spec: dict, work: str, *, need_vw: bool) -> dict:
    """Make (or reuse) the store, the text files and the VW copies of one data set."""
    import streamsvm as ss
    from streamsvm.io._store import read_meta
    name = spec["name"]
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    ds = dict(spec)
    prep = {}
    if spec["kind"] == "synthetic":
        from tools.make_synthetic import make_synthetic
        sy = spec["synthetic"]
        tag = f"r{spec['rows']}_f{sy['features']}_k{sy['nnz_per_row']}_s{sy['seed']}"
        ds["train_text"] = os.path.join(d, f"train_{tag}.svm")
        ds["test_text"] = os.path.join(d, f"test_{tag}.svm")
        if not (os.path.exists(ds["train_text"]) and os.path.exists(ds["test_text"])):
            log(f"{name}: generating {spec['rows'] + sy['test_rows']:,} rows")
            t0 = time.perf_counter()
            make_synthetic(ds["train_text"], rows=spec["rows"] + sy["test_rows"],
                           features=sy["features"], nnz_per_row=sy["nnz_per_row"],
                           classes=sy["classes"], noise=sy["noise"], zipf=sy["zipf"],
                           seed=sy["seed"], progress=False)
            split_tail(ds["train_text"], sy["test_rows"], ds["test_text"])
            prep["generate_s"] = time.perf_counter() - t0
        n_features, dtype = sy["features"], "float32"
        chunk_rows = 65536
    else:
        n_features, dtype = None, "float64"
        chunk_rows = 4096
    store_path = os.path.join(d, "train.zarr")
    meta = read_meta(store_path) if os.path.exists(store_path) else None
    src_size = os.path.getsize(ds["train_text"])
    from streamsvm.io import FORMAT_VERSION
    ok = (meta is not None and meta.get("complete")
          and meta.get("format_version") == FORMAT_VERSION
          and meta.get("source", {}).get("files", [{}])[0].get("size") == src_size
          and meta.get("chunk_rows") == chunk_rows)
    if not ok:
        log(f"{name}: converting {src_size / MB:,.1f} MB of text (--shuffle)")
        t0 = time.perf_counter()
        scratch = os.path.join(d, "shuffle-scratch")
        os.makedirs(scratch, exist_ok=True)      # convert() does not create it
        ss.convert([ds["train_text"]], store_path, chunk_rows=chunk_rows, shuffle=True, seed=0,
                   n_features=n_features, dtype=dtype, overwrite=True,
                   scratch_dir=scratch)
        prep["convert_s"] = time.perf_counter() - t0
        shutil.rmtree(scratch, ignore_errors=True)
    store = ss.open_store(store_path)
    info = store.info()
    ds.update(store=store_path, n_rows=store.n_rows, n_features=store.n_features,
              nnz=store.nnz, task=store.task, classes=[float(c) for c in store.classes],
              chunk_rows=store.chunk_rows, n_chunks=store.n_chunks, dtype=str(store.dtype),
              store_bytes_on_disk=info["bytes_on_disk"], decoded_bytes=info["bytes_uncompressed"],
              text_bytes=src_size, prep=prep)
    if need_vw:
        ds["vw_train"] = os.path.join(d, "train.vw")
        if not os.path.exists(ds["vw_train"]):
            t0 = time.perf_counter()
            libsvm_to_vw(ds["train_text"], ds["vw_train"], ds["classes"], ds["task"],
                         shuffle_seed=0)
            prep["vw_text_s"] = time.perf_counter() - t0
        if ds["task"] == "multiclass" and ds.get("test_text"):
            ds["vw_test"] = os.path.join(d, "test.vw")
            if not os.path.exists(ds["vw_test"]):
                libsvm_to_vw(ds["test_text"], ds["vw_test"], ds["classes"], ds["task"])
    return ds


class Evaluator:
    """Grades weights on one data set: objective and accuracy on train, accuracy on test.

    Data that fit in memory are loaded once (train from the store — the exact values every
    method saw — test from its libsvm file); out-of-core stores are streamed chunk by chunk,
    all weights of one run in the same pass.
    """

    def __init__(self, ds: dict):
        import numpy as np
        import scipy.sparse as sp
        import streamsvm as ss
        self.ds = ds
        self.store = ss.open_store(ds["store"])
        self.task = ds["task"]
        self.k = 1 if self.task == "binary" else len(ds["classes"])
        self.train = None
        if not ds.get("ooc"):
            parts = list(self._chunks())
            self.train = (sp.vstack([p[0] for p in parts]).tocsr(),
                          np.concatenate([p[1] for p in parts]))
        self.test = None
        if ds.get("test_text"):
            self.test = self._load_test(ds["test_text"])

    def _chunks(self):
        import scipy.sparse as sp
        d = self.store.n_features
        for ch in self.store.iter_chunks():
            X = sp.csr_matrix((ch.data.astype("float64"), ch.indices, ch.indptr),
                              shape=(ch.n_rows, d))
            yield X, ch.y

    def _load_test(self, path):
        import numpy as np
        from sklearn.datasets import load_svmlight_file
        X, y = load_svmlight_file(path, dtype=np.float64)
        classes = np.asarray(self.ds["classes"])
        if self.task == "binary":
            yy = np.where(y == classes[-1], 1.0, -1.0)
        else:
            idx = np.searchsorted(classes, y)
            known = (idx < len(classes)) & (classes[np.minimum(idx, len(classes) - 1)] == y)
            yy = np.where(known, idx, -1)      # unknown test labels count as errors
        return X.tocsr(), yy

    def evaluate(self, weights: list, C: float, loss: str | None) -> list[dict]:
        """``weights``: list of (W, b); returns [{primal, train_accuracy, test_accuracy}]."""
        accs = [ObjectiveAccumulator(W, b, C=C, loss=loss, task=self.task) for W, b in weights]
        if self.train is not None:
            for a in accs:
                a.add(*self.train)
        else:
            for X, y in self._chunks():
                for a in accs:
                    a.add(X, y)
        out = []
        for (W, b), a in zip(weights, accs):
            r = {"primal": a.primal, "train_accuracy": a.accuracy, "test_accuracy": None}
            if self.test is not None:
                t = ObjectiveAccumulator(W, b, C=C, loss=None, task=self.task)
                t.add(*self.test)
                r["test_accuracy"] = t.accuracy
            out.append(r)
        return out


# =============================================================================================
# methods
# =============================================================================================

def streamsvm_solvers() -> list[str]:
    """Names of every registered streamsvm solver (the registry decides, not this file)."""
    from streamsvm.solvers import SOLVERS
    return sorted(SOLVERS)


def solver_supported(name: str, *, C: float, loss: str, tol: float, max_passes: float):
    """(True, None) if solver ``name`` accepts the common parameters, else (False, why)."""
    from streamsvm.exceptions import InvalidParameterError
    from streamsvm.solvers import SOLVERS
    try:
        SOLVERS[name](**solver_params(name, C=C, loss=loss, tol=tol, max_passes=max_passes))
    except (InvalidParameterError, TypeError) as exc:
        return False, f"{type(exc).__name__}: {exc}"
    return True, None


def plan_methods(task: str, loss: str, *, ooc: bool, solvers=None) -> list[dict]:
    """The methods run for one (task, loss), in table order.

    Each entry: ``id``, ``label``, ``kind`` (worker function), ``family`` and the method's
    settings. In-memory methods on an out-of-core data set are planned with ``skip``.
    """
    solvers = streamsvm_solvers() if solvers is None else solvers
    out = [{"id": f"streamsvm-{s}", "label": f"streamsvm {s}", "kind": "streamsvm",
            "family": "streamsvm", "solver": s} for s in solvers if trains(s, loss)]
    if loss == "ww":               # Weston–Watkins: no other tool here trains it (LIBLINEAR's
        return out                 # joint multiclass SVM, -s 4, is in the hinge table)
    if loss == "hinge":
        out.append({"id": "liblinear-s3", "label": "LIBLINEAR -s 3", "kind": "liblinear",
                    "family": "liblinear", "s": 3})
    else:
        out.append({"id": "liblinear-s1", "label": "LIBLINEAR -s 1", "kind": "liblinear",
                    "family": "liblinear", "s": 1})
        out.append({"id": "liblinear-s2", "label": "LIBLINEAR -s 2", "kind": "liblinear",
                    "family": "liblinear", "s": 2})
    if task == "multiclass" and loss == "hinge":
        out.append({"id": "liblinear-s4", "label": "LIBLINEAR -s 4 (Crammer–Singer)",
                    "kind": "liblinear", "family": "liblinear", "s": 4,
                    "objective": None})
    out.append({"id": "sklearn-linearsvc", "label": "sklearn LinearSVC", "kind": "linearsvc",
                "family": "sklearn"})
    if loss == "hinge":
        out.append({"id": "sklearn-sgd", "label": "sklearn SGD (partial_fit)", "kind": "sgd",
                    "family": "sklearn"})
        out.append({"id": "vw", "label": "Vowpal Wabbit", "kind": "vw", "family": "vw",
                    **({"objective": None} if task == "multiclass" else {})})
    for m in out:
        if ooc and m["kind"] in IN_MEMORY_METHODS:
            m["skip"] = "needs the whole data set in memory (out-of-core data set)"
    return out


def _select(methods: list[dict], patterns) -> list[dict]:
    if not patterns:
        return methods
    return [m for m in methods if any(p == m["id"] or p in m["id"] for p in patterns)]


def build_spec(m: dict, ds: dict, C: float, loss: str, cfg: dict, outdir: str) -> dict:
    ooc = ds.get("ooc", False)
    spec = {"kind": m["kind"], "method": m["id"], "C": C, "loss": loss, "seed": cfg["seed"],
            "outdir": outdir, "repeat": OOC["repeat"] if ooc else cfg["repeat"],
            "repeat_under": cfg["repeat_under"],
            "dataset": {k: ds.get(k) for k in ("name", "store", "train_text", "test_text",
                                               "vw_train", "vw_test", "n_rows", "n_features",
                                               "task", "classes", "ooc")}}
    if m["kind"] == "streamsvm":
        spec.update(solver=m["solver"], tol=cfg["tol"], max_passes=cfg["max_passes"],
                    memory=ds.get("budget", cfg["memory"]), readers=cfg.get("readers"),
                    curve="callback" if ooc else "rerun",
                    reference_tol=None if ooc else cfg["reference_tol"])
    elif m["kind"] == "liblinear":
        s = m["s"]
        if s == 4:
            spec.update(s=4, eps=[0.1], default_eps=0.1)
        else:
            ladder = cfg["eps_primal"] if s == 2 else cfg["eps_dual"]
            spec.update(s=s, eps=ladder, default_eps=0.01 if s == 2 else 0.1,
                        ladder_budget=cfg["ladder_budget"])
    elif m["kind"] == "linearsvc":
        spec.update(tol=1e-4, max_iter=1000)
    elif m["kind"] == "sgd":
        spec.update(epochs=OOC["sgd_epochs"] if ooc else cfg["sgd_epochs"])
    elif m["kind"] == "vw":
        spec.update(passes=OOC["vw_passes"] if ooc else cfg["vw_passes"],
                    workdir=os.path.join(outdir, "vw"))
    return spec


def run_method(m: dict, ds: dict, C: float, loss: str, cfg: dict, evaluator: Evaluator) -> dict:
    """Spawn the worker for one method, grade its weights, return the run record."""
    import numpy as np
    outdir = os.path.join(cfg["out"], "runs", ds["name"], f"C{C:g}", loss, m["id"])
    os.makedirs(outdir, exist_ok=True)
    objective_loss = m.get("objective", loss)
    run = {"dataset": ds["name"], "task": ds["task"], "C": C,
           "loss": loss if m["id"] != "liblinear-s4" else "crammer_singer",
           "objective_loss": objective_loss, "method": m["id"], "label": m["label"],
           "family": m["family"], "status": None, "message": None, "steps": [],
           "outdir": os.path.relpath(outdir, cfg["out"])}
    if m.get("skip"):
        run.update(status="skipped", message=m["skip"])
        return run
    if m["kind"] == "streamsvm":
        ok, why = solver_supported(m["solver"], C=C, loss=loss, tol=cfg["tol"],
                                   max_passes=cfg["max_passes"])
        if not ok:
            run.update(status="unsupported", message=why)
            return run
    spec = build_spec(m, ds, C, loss, cfg, outdir)
    run["spec"] = {k: v for k, v in spec.items() if k not in ("dataset", "outdir")}
    spec_path = os.path.join(outdir, "spec.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f, indent=1)
    for name in ("result.json", "weights.npz"):
        if os.path.exists(os.path.join(outdir, name)):
            os.remove(os.path.join(outdir, name))
    child = run_child([sys.executable, os.path.abspath(__file__), "--worker", spec_path],
                      timeout=cfg["timeout"], stdout_path=os.path.join(outdir, "stdout.txt"),
                      stderr_path=os.path.join(outdir, "stderr.txt"))
    run["child"] = child
    res_path = os.path.join(outdir, "result.json")
    if not os.path.exists(res_path):
        run.update(status="timeout" if child["timed_out"] else "error",
                   message=("killed after %.0f s" % cfg["timeout"]) if child["timed_out"]
                   else _tail(os.path.join(outdir, "stderr.txt"), 800))
        return run
    with open(res_path) as f:
        res = json.load(f)
    run.update(status=res["status"], message=res["message"], extra=res.get("extra", {}))
    history = run["extra"].pop("history", None)
    if history is not None:
        run["history"] = history
    child["vm_hwm_mb"] = res.get("vm_hwm_mb")
    if res.get("t_ready") and child.get("t_spawn"):
        child["startup_s"] = res["t_ready"] - child["t_spawn"]
    steps = res["steps"]
    weights = []
    if steps and any(s.get("weights") for s in steps):
        with np.load(os.path.join(outdir, "weights.npz")) as z:
            for s in steps:
                if s.get("weights"):
                    weights.append((s, (z[s["weights"] + ".W"], z[s["weights"] + ".b"])))
    if weights:
        t0 = time.perf_counter()
        graded = evaluator.evaluate([w for _, w in weights], C, objective_loss)
        run["eval_seconds"] = time.perf_counter() - t0
        for (s, _), g in zip(weights, graded):
            s.update({k: v for k, v in g.items() if not (k == "primal" and v is None)})
    run["steps"] = steps
    if m["kind"] == "streamsvm" and res["status"] == "ok" and cfg.get("cli", True):
        run["cli"] = run_cli(m["solver"], ds, C, loss, cfg, outdir)
    return run


def run_cli(solver: str, ds: dict, C: float, loss: str, cfg: dict, outdir: str) -> dict:
    """The user's path: ``streamsvm train`` in a fresh process (whole-process time, peak RSS)."""
    model = os.path.join(outdir, "cli-model.json")
    argv = [sys.executable, "-m", "streamsvm.cli", "train", ds["store"], "-o", model, "--json",
            "-q", "--solver", solver, "-C", repr(C), "--tol", repr(cfg["tol"]),
            "--max-passes", repr(cfg["max_passes"]),
            "--memory", str(ds.get("budget", cfg["memory"])), "--seed", str(cfg["seed"])]
    params = solver_params(solver, C=C, loss=loss, tol=cfg["tol"], max_passes=cfg["max_passes"])
    if "loss" in params:
        argv += ["--loss", loss]
    if "gap_decay" in params:
        argv += ["--gap-decay", repr(params["gap_decay"])]
    if cfg.get("readers"):
        argv += ["--readers", str(cfg["readers"])]
    child = run_child(argv, timeout=cfg["timeout"], stdout_path=os.path.join(outdir, "cli.out"),
                      stderr_path=os.path.join(outdir, "cli.err"))
    out = {"argv": " ".join(shlex.quote(a) for a in argv[1:]), **child}
    try:
        with open(os.path.join(outdir, "cli.out")) as f:
            lines = [ln for ln in f.read().splitlines() if ln.startswith("{")]
        out["summary"] = json.loads(lines[-1])
    except (OSError, IndexError, ValueError):
        out["error"] = _tail(os.path.join(outdir, "cli.err"), 800)
    if os.path.exists(model):
        os.remove(model)
    return out


# =============================================================================================
# best objective, gaps, headline numbers
# =============================================================================================

def group_key(run: dict) -> tuple:
    return (run["dataset"], float(run["C"]), run["loss"])


def _headline_index(run: dict):
    steps = run.get("steps") or []
    for i, s in enumerate(steps):
        if s.get("role") == "headline":
            return i
    for i, s in enumerate(steps):
        if s.get("default"):
            return i
    return 0 if steps else None


def finalize_groups(runs: list[dict], target: float = TARGET_GAP) -> dict:
    """Best objective per (data set, C, loss); gaps of every step; headline fields of every run.

    Returns ``{"dataset|C|loss": {"best_primal", "best_by", "best_dual", "best_dual_by",
    "certified_gap"}}`` where ``certified_gap = (best_primal − best_dual) / best_primal`` bounds
    how far the best objective found can be from the true optimum (the dual of a streamsvm run
    is a lower bound).
    """
    groups: dict[tuple, list] = {}
    for r in runs:
        groups.setdefault(group_key(r), []).append(r)
    best = {}
    for key, rs in groups.items():
        cands, duals = [], []
        for r in rs:
            for s in r.get("steps", []):
                if s.get("primal") is not None and r.get("objective_loss") is not None:
                    cands.append((s["primal"], f"{r['method']} {s.get('label', '')}".strip()))
                if s.get("solver_dual") is not None:
                    duals.append((s["solver_dual"], f"{r['method']} {s.get('label', '')}".strip()))
        p = best_objective([c[0] for c in cands])
        entry = {"best_primal": p, "best_by": None, "best_dual": None, "best_dual_by": None,
                 "certified_gap": None}
        if p is not None:
            entry["best_by"] = next(c[1] for c in cands if c[0] == p)
        if duals:
            dmax = max(duals)
            entry["best_dual"], entry["best_dual_by"] = dmax
            if p:
                entry["certified_gap"] = (p - dmax[0]) / abs(p)
        best["|".join(map(str, key))] = entry
        for r in rs:
            for s in r.get("steps", []):
                s["rel_gap"] = rel_gap(s.get("primal"), p)
            _headline(r, target)
    return best


def _headline(run: dict, target: float) -> None:
    i = _headline_index(run)
    run["headline"] = i
    run["target_gap"] = target
    fields = ("fit_seconds", "passes", "passes_kind", "primal", "rel_gap", "train_accuracy",
              "test_accuracy", "converged", "certificate")
    if i is None:
        for k in fields + ("process_seconds", "process_kind", "peak_rss_mb"):
            run.setdefault(k, None)
        return
    s = run["steps"][i]
    for k in fields:
        run[k] = s.get(k)
    child = run.get("child") or {}
    cli = run.get("cli") or {}
    if cli.get("summary") and cli.get("rc") == 0:
        run["process_seconds"], run["process_kind"] = cli["wall_s"], "measured (CLI)"
        src = cli
    else:
        st, fit = child.get("startup_s"), s.get("fit_seconds")
        run["process_seconds"] = st + fit if st is not None and fit is not None else None
        run["process_kind"] = "start-up + load + fit"
        src = child
    for k in ("peak_rss_mb", "peak_rss_anon_mb", "peak_rss_file_mb"):
        run[k] = src.get(k)
    ladder = [x for x in run["steps"] if x.get("role") == "ladder"]
    if ladder and run.get("objective_loss") is not None:
        hit = first_within(ladder, target)
        run["to_target"] = None if hit is None else {
            k: hit.get(k) for k in ("label", "param", "fit_seconds", "passes", "passes_kind",
                                    "primal", "rel_gap", "train_accuracy", "test_accuracy")}
        if hit is not None and child.get("startup_s") is not None:
            run["to_target"]["process_seconds"] = child["startup_s"] + hit["fit_seconds"]


# =============================================================================================
# I/O floor
# =============================================================================================

def checks_cost(store_url: str, rounds: int = 6, memory=None, passes: int = 5) -> dict:
    """Seconds of dcd's streamed sweeps with the store's integrity checks (CRC-32C of the
    inner chunks, value ranges, row pointers) and without them, in alternation in this
    process: the first sweep (every chunk checked on first read) apart from the later ones
    (a local chunk is checked once per run). ``memory``: the training budget (default an
    eighth of the decoded store, as the out-of-core suites use), so every sweep streams."""
    import warnings
    import streamsvm as ss
    from streamsvm._train import train
    from streamsvm.io import _direct, _store
    store0 = ss.open_store(store_url)
    if memory is None:
        memory = int(store0.info()["bytes_uncompressed"] * OOC["budget_fraction"])
    first, later = {True: [], False: []}, {True: [], False: []}
    try:
        for i in range(rounds):
            for on in (True, False) if i % 2 == 0 else (False, True):
                _direct.VERIFY_CHECKSUMS = _store.CHECK_ROWS = on
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    _, res = train(ss.open_store(store_url), loss="hinge", memory=memory,
                                   max_passes=passes, disk_slab=False, slab=False)
                from streamsvm.solvers._driver import iteration_seconds
                sweeps = [t for h, t in zip(res.history, iteration_seconds(res.history))
                          if h["kind"] == "stream"]
                first[on].append(sweeps[0])
                later[on].extend(sweeps[1:])
    finally:
        _direct.VERIFY_CHECKSUMS = _store.CHECK_ROWS = True
    med = statistics.median
    out = {"store": store_url, "rounds": rounds, "memory": memory, "passes": passes,
           "first_sweep_s": {"checks": med(first[True]), "no_checks": med(first[False])},
           "later_sweep_s": {"checks": med(later[True]), "no_checks": med(later[False])},
           "later_sweep_min_s": {"checks": min(later[True]), "no_checks": min(later[False])},
           "all": {"first": {str(k): v for k, v in first.items()},
                   "later": {str(k): v for k, v in later.items()}}}
    out["first_slowdown"] = out["first_sweep_s"]["checks"] / out["first_sweep_s"]["no_checks"] - 1
    out["later_slowdown"] = out["later_sweep_s"]["checks"] / out["later_sweep_s"]["no_checks"] - 1
    return out


def checks_table(r: dict) -> str:
    """Markdown table of :func:`checks_cost`."""
    rows = [("first streamed sweep (every chunk checked)", r["first_sweep_s"],
             r["first_slowdown"]),
            ("later streamed sweeps, median", r["later_sweep_s"], r["later_slowdown"])]
    lines = ["| sweep | with checks s | without s | slowdown |", "| :--- | ---: | ---: | ---: |"]
    for what, t, slow in rows:
        lines.append(f"| {what} | {t['checks']:.3f} | {t['no_checks']:.3f} | {100 * slow:+.1f} % |")
    return "\n".join(lines)


def io_baseline(store_url: str, repeat: int = 3, block_rows=None) -> dict:
    """Time to read and decompress every chunk once: a plain ``read_chunk`` loop, and a
    scheduler pass with read-ahead and no compute (what a solver pass costs at best), with
    two read-ahead threads and with one (what a training pass gets on 2 CPUs: one reader)."""
    import streamsvm as ss
    from streamsvm.schedule import PassScheduler
    store = ss.open_store(store_url)
    n = store.n_rows
    if block_rows is None:      # the default of streamsvm.estimators.train
        block_rows = int(min(store.chunk_rows, max(256, -(-n // 512))))
    loop, sched_t, one_t, cpu_t, nbytes = [], [], [], [], 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        nbytes = 0
        for i in range(store.n_chunks):
            nbytes += store.read_chunk(i).nbytes
        loop.append(time.perf_counter() - t0)
        for depth, times in ((2, sched_t), (1, one_t)):
            sched = PassScheduler(store, memory=0, block_rows=block_rows, prefetch=depth,
                                  readers=depth)
            t0, c0 = time.perf_counter(), time.process_time()
            sched.map_reduce(lambda b, *_: None)
            times.append(time.perf_counter() - t0)
            if depth == 2:      # CPU seconds of every thread: the work of decompressing
                cpu_t.append(time.process_time() - c0)
            sched.close()
    out = {"store": store_url, "n_rows": n, "n_chunks": store.n_chunks,
           "decoded_bytes": nbytes, "bytes_on_disk": store.bytes_on_disk(),
           "block_rows": block_rows, "repeat": repeat,
           "read_chunk_loop_s": statistics.median(loop), "read_chunk_loop_all_s": loop,
           "scheduler_pass_s": statistics.median(sched_t), "scheduler_pass_all_s": sched_t,
           # one read-ahead thread: the reading a pass gets when the solver's kernel keeps
           # the other core of a 2-core machine busy
           "one_reader_pass_s": statistics.median(one_t), "one_reader_pass_all_s": one_t,
           "scheduler_pass_cpu_s": statistics.median(cpu_t),
           "page_cache": "warm (the store was read just before; nothing was evicted)"}
    out["floor_s"] = min(out["read_chunk_loop_s"], out["scheduler_pass_s"])
    out["decoded_mb_per_s"] = nbytes / MB / out["floor_s"]
    return out


_IO_RSS_CODE = r"""
import sys, streamsvm, streamsvm.estimators, streamsvm.cli
from streamsvm.schedule import PassScheduler
store = streamsvm.open_store(sys.argv[1]); mode = sys.argv[2]
if mode == "loop":
    for i in range(store.n_chunks):
        store.read_chunk(i)
if mode in ("runtime", "runtime_pass"):
    # the solver's compiled kernels loaded (numba's on-disk cache) on a few rows, for the
    # in-memory and the streamed code paths: what a run costs before it holds any data
    import warnings
    import scipy.sparse as sp
    from streamsvm import InMemoryStore
    from streamsvm._train import train
    warnings.simplefilter("ignore")
    part = store.read_rows(0, min(store.n_rows, 2000))
    X = sp.csr_matrix((part.data, part.indices, part.indptr),
                      shape=(part.n_rows, store.n_features))
    # the first 1,000 features only: the kernels are the same for every width, and the
    # model is not the floor (the tables add it); with all of them a 2*10^6-feature store's
    # model did not fit the 16MB run, and the floor fell back to the bare import
    X = X[:, :min(store.n_features, 1000)]
    for memory, block_rows, slabs in (("1GB", None, True), ("16MB", 100, False)):
        train(InMemoryStore(X, part.y, chunk_rows=500, dtype=store.dtype),
              memory=memory, block_rows=block_rows, max_passes=3, tol=0.5,
              slab=slabs, disk_slab=slabs,
              loss=sys.argv[3] if mode == "runtime" and len(sys.argv) > 3 else "hinge")
if mode in ("scheduler", "runtime_pass"):
    n = store.n_rows
    s = PassScheduler(store, memory=int(sys.argv[3]) if mode == "scheduler" else 0,
                      block_rows=int(min(store.chunk_rows, max(256, -(-n // 512)))))
    s.map_reduce(lambda b, *_: None)
    s.close()
"""


def io_rss(store_url: str, out_dir: str, budget: int = 0) -> dict:
    """Peak RSS (MB) of fresh processes that import streamsvm and open the store, then
    (``import``) do nothing, (``runtime``) also load dcd's compiled kernels by training on
    the first 2,000 rows in memory and streamed, (``read_chunk_loop``) read every chunk
    once, or (``scheduler_pass``) run one no-compute scheduler pass with read-ahead and a
    cache budget of ``budget`` bytes: the memory the reading path needs before any solver;
    (``runtime_pass``) load the kernels, then one such pass with no cache and no per-row
    state: the least any streamed training pass can peak at."""
    os.makedirs(out_dir, exist_ok=True)
    out = {}
    for key, args in (("import", ["none"]), ("runtime", ["runtime"]),
                      ("read_chunk_loop", ["loop"]),
                      ("scheduler_pass", ["scheduler", str(int(budget))]),
                      ("runtime_pass", ["runtime_pass"])):
        r = run_child([sys.executable, "-c", _IO_RSS_CODE, store_url, *args], timeout=3600,
                      stdout_path=os.path.join(out_dir, f"io-rss-{key}.out"),
                      stderr_path=os.path.join(out_dir, f"io-rss-{key}.err"))
        out[key + "_mb"] = r["peak_rss_mb"] if r["rc"] == 0 else None
        out[key + "_anon_mb"] = r.get("peak_rss_anon_mb") if r["rc"] == 0 else None
        if r["rc"] != 0:
            log(f"RSS probe {key!r} failed (exit {r['rc']}): see "
                f"{os.path.join(out_dir, f'io-rss-{key}.err')}")
    out["scheduler_budget_bytes"] = int(budget)
    return out


def import_rss(store_url: str, out_dir: str) -> dict:
    """Peak RSS of a process that imports streamsvm and opens the store (the RSS floor)."""
    code = ("import streamsvm, streamsvm.estimators, streamsvm.cli, sys; "
            "streamsvm.open_store(sys.argv[1])")
    return run_child([sys.executable, "-c", code, store_url], timeout=120,
                     stdout_path=os.path.join(out_dir, "rss-floor.out"),
                     stderr_path=os.path.join(out_dir, "rss-floor.err"))


def pass_times(history: list[dict]) -> dict:
    """Seconds per pass of a streamsvm run from its callback history.

    ``first_sweep_s``: the first sweep (one full streamed pass, no shrinking yet);
    ``stream_s_per_pass``: median over streamed sweeps of sweep seconds / passes it added;
    ``exact_s_per_pass``: the same for the exact checks (read-only passes); ``disk_sweep_s``: median seconds of a sweep over dcd's disk slab
    (the active rows' uncompressed copy: a fraction of the store) and
    ``disk_s_per_pass``: the same per pass of rows it visited; ``first_kernel_s`` and
    ``stream_kernel_s_per_pass``: the seconds spent inside the solver's numba kernels
    (``kernel_seconds`` of the history) in the first sweep and per pass of the streamed
    sweeps (median); ``stream_pairs``: ``(seconds, kernel seconds)`` per pass of each
    streamed sweep, in order.
    """
    from streamsvm.solvers._driver import iteration_seconds
    stream, exact, disk, disk_pp, prev, first = [], [], [], [], 0.0, None
    kern, pairs, first_kern = [], [], None
    for h, span in zip(history, iteration_seconds(history)):
        dp = h["passes"] - prev
        prev = h["passes"]
        if dp <= 0 or h.get("kind") not in ("stream", "disk", "check"):
            continue
        v = span / dp
        if h["kind"] == "check":
            exact.append(v)
        elif h["kind"] == "disk":
            disk.append(span)
            disk_pp.append(v)
        else:
            stream.append(v)
            if h.get("kernel_seconds") is not None:
                kern.append(h["kernel_seconds"] / dp)
                pairs.append((v, h["kernel_seconds"] / dp))
        if first is None and h["kind"] == "stream":
            first = span / dp
            first_kern = h["kernel_seconds"] / dp if h.get("kernel_seconds") is not None \
                else None
    med = (lambda x: statistics.median(x) if x else None)  # noqa: E731
    return {"first_sweep_s": first, "stream_s_per_pass": med(stream),
            "exact_s_per_pass": med(exact), "disk_sweep_s": med(disk),
            "disk_s_per_pass": med(disk_pp), "first_kernel_s": first_kern,
            "stream_kernel_s_per_pass": med(kern), "stream_pairs": pairs,
            "stream_sweeps": len(stream),
            "exact_sweeps": len(exact), "disk_sweeps": len(disk)}


def pass_bounds(pt: dict, decode_cpu_s, cores, floor_s: float) -> dict:
    """The least time a pass can take on this machine, whatever the overlap of reading and
    solving: the solver's kernel is one thread (dual CD is sequential), the
    decompression needs ``decode_cpu_s`` CPU seconds (measured by the I/O floor), and both
    share ``cores`` cores — ``max(kernel, (decode_cpu + kernel) / cores)``. ``*_bound_ratio``
    is that bound ÷ the I/O floor (the issue's ratio can be no lower), ``*_vs_bound`` the
    measured time ÷ the bound (1 = perfect overlap).

    ``stream_vs_bound`` divides the median sweep by the bound of the median kernel time, two
    medians that may come from different sweeps (an early sweep, where most rows take a
    step, has both a long kernel and a long sweep); ``stream_vs_own_bound`` is the median
    over the streamed sweeps of each sweep ÷ the bound of its own kernel time, the ratio
    for a pass as the bound is defined."""
    out = {}
    pairs = pt.get("stream_pairs") or []
    if pairs and decode_cpu_s is not None and cores:
        out["stream_vs_own_bound"] = statistics.median(
            v / max(k, (decode_cpu_s + k) / cores) for v, k in pairs)
    for key, kern, meas in (("first", pt.get("first_kernel_s"), pt.get("first_sweep_s")),
                            ("stream", pt.get("stream_kernel_s_per_pass"),
                             pt.get("stream_s_per_pass"))):
        if kern is None or decode_cpu_s is None or not cores:
            continue
        bound = max(kern, (decode_cpu_s + kern) / cores)
        out[key + "_bound_s"] = bound
        out[key + "_bound_ratio"] = bound / floor_s
        out[key + "_vs_bound"] = meas / bound if meas else None
    out["decode_cpu_s"], out["cores"] = decode_cpu_s, cores
    return out


def dcd_targets(results: dict) -> list[dict]:
    """Verdicts on issue 3's targets, from the numbers in ``results``."""
    out = []
    runs = [r for r in results["runs"] if r["status"] == "ok"]
    by = {(r["dataset"], r["C"], r["loss"], r["method"]): r for r in runs}
    dsinfo = {d["name"]: d for d in results["datasets"]}
    for r in runs:
        if r["method"] != "streamsvm-dcd":
            continue
        ds = dsinfo.get(r["dataset"], {})
        if not ds.get("ooc"):
            peer = {"hinge": "liblinear-s3", "squared_hinge": "liblinear-s1"}[r["loss"]]
            p = by.get((r["dataset"], r["C"], r["loss"], peer))
            tt = (p or {}).get("to_target")
            v = {"target": "in-memory solver time ≤ LIBLINEAR's to the same gap",
                 "dataset": r["dataset"], "C": r["C"], "loss": r["loss"],
                 "streamsvm_fit_s": r.get("fit_seconds"), "peer": peer,
                 "peer_fit_s": tt.get("fit_seconds") if tt else None,
                 "peer_setting": tt.get("label") if tt else None}
            v["ratio"] = (v["streamsvm_fit_s"] / v["peer_fit_s"]
                          if v["streamsvm_fit_s"] and v["peer_fit_s"] else None)
            v["met"] = None if v["ratio"] is None else v["ratio"] <= 1.0
            out.append(v)
            continue
        io = (results.get("io_baseline") or {}).get(r["dataset"])
        budget = ds.get("budget_bytes")
        model_mb = 8.0 * ds["n_features"] * (1 if ds["task"] == "binary"
                                             else len(ds["classes"])) / MB
        floor_rss = (results.get("rss_floor") or {}).get(r["dataset"])
        rss = r.get("peak_rss_mb")
        v = {"target": "out of core: peak RSS ≤ budget + model", "dataset": r["dataset"],
             "C": r["C"], "loss": r["loss"], "peak_rss_mb": rss,
             "peak_rss_anon_mb": r.get("peak_rss_anon_mb"),
             "peak_rss_file_mb": r.get("peak_rss_file_mb"),
             "budget_mb": budget / MB if budget else None, "model_mb": model_mb,
             "import_floor_mb": floor_rss}
        if rss is not None and budget:
            v["met"] = rss <= budget / MB + model_mb
            if floor_rss is not None:
                v["met_net_of_import_floor"] = rss - floor_rss <= budget / MB + model_mb
        out.append(v)
        if io and r.get("history"):
            pt = pass_times(r["history"])
            floor = io["floor_s"]
            w = {"target": "out of core: each pass ≤ 1.25 × read+decompress time",
                 "dataset": r["dataset"], "C": r["C"], "loss": r["loss"], "io_floor_s": floor,
                 **pt}
            w["overall_s_per_pass"] = (r["fit_seconds"] / r["passes"]
                                       if r.get("fit_seconds") and r.get("passes") else None)
            for k in ("first_sweep_s", "stream_s_per_pass", "exact_s_per_pass",
                      "overall_s_per_pass", "disk_sweep_s", "disk_s_per_pass"):
                w[k + "_ratio"] = w[k] / floor if w.get(k) else None
            one = io.get("one_reader_pass_s")
            w["one_reader_s"] = one
            w["stream_s_per_pass_vs_one_reader"] = (w["stream_s_per_pass"] / one
                                                   if one and w.get("stream_s_per_pass")
                                                   else None)
            cores = results.get("machine", {}).get("cpus_usable") or \
                results.get("machine", {}).get("cpu_count")
            w.update(pass_bounds(pt, io.get("scheduler_pass_cpu_s"), cores, floor))
            w["met"] = (w.get("stream_s_per_pass_ratio") is not None
                        and w["stream_s_per_pass_ratio"] <= 1.25)
            w["met_overall"] = (w.get("overall_s_per_pass_ratio") is not None
                                and w["overall_s_per_pass_ratio"] <= 1.25)
            out.append(w)
    return out


# =============================================================================================
# results file
# =============================================================================================

REQUIRED_RUN_KEYS = ("dataset", "task", "C", "loss", "method", "label", "family", "status",
                     "message", "steps")
STATUSES = ("ok", "unsupported", "unavailable", "skipped", "error", "timeout")


def validate_results(res: dict) -> None:
    """Raise ValueError if ``res`` is not a well-formed results document."""
    def need(d, keys, where):
        missing = [k for k in keys if k not in d]
        if missing:
            raise ValueError(f"{where}: missing {missing}")
    need(res, ("schema", "created", "command", "suite", "machine", "versions", "config",
               "datasets", "runs", "best"), "results")
    if res["schema"] != SCHEMA:
        raise ValueError(f"schema {res['schema']!r} != {SCHEMA!r}")
    need(res["machine"], ("cpu_model", "cpu_count"), "machine")
    need(res["config"], ("seed",), "config")
    for i, r in enumerate(res["runs"]):
        need(r, REQUIRED_RUN_KEYS, f"runs[{i}]")
        if r["status"] not in STATUSES:
            raise ValueError(f"runs[{i}]: status {r['status']!r} not in {STATUSES}")
        if r["status"] == "ok":
            need(r, ("fit_seconds", "passes", "primal", "rel_gap", "peak_rss_mb",
                     "process_seconds", "train_accuracy", "test_accuracy"), f"runs[{i}]")
            for j, s in enumerate(r["steps"]):
                need(s, ("role", "label", "fit_seconds", "passes"), f"runs[{i}].steps[{j}]")
                if s.get("rel_gap") is not None and s["rel_gap"] < -1e-9:
                    raise ValueError(f"runs[{i}].steps[{j}]: negative gap to the best objective")


def _clean(o):
    """JSON-safe copy: numpy scalars → Python, NaN/inf → None."""
    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    if hasattr(o, "item") and not isinstance(o, (str, bytes)):
        try:
            o = o.item()
        except (ValueError, AttributeError):
            return str(o)
    if isinstance(o, float) and not math.isfinite(o):
        return None
    return o


def write_json(res: dict, path: str) -> None:
    tmp = path + ".partial"
    with open(tmp, "w") as f:
        json.dump(_clean(res), f, indent=1)
    os.replace(tmp, path)


# =============================================================================================
# the suite
# =============================================================================================

def run_suite(cfg: dict, argv: list[str]) -> dict:
    out = cfg["out"]
    os.makedirs(out, exist_ok=True)
    res = {"schema": SCHEMA, "created": datetime.datetime.now(datetime.timezone.utc).isoformat(
        timespec="seconds"), "command": "python tools/bench.py " + " ".join(
        shlex.quote(a) for a in argv), "suite": cfg["suite"], "machine": machine_info(),
        "versions": versions(), "config": {k: v for k, v in cfg.items() if k != "out"},
        "objective": "sum over models of 0.5||w||^2 + 0.5 b^2 + C sum loss(y (w.x + b)), "
                     "bias a regularized constant feature of value 1 (LIBLINEAR -B 1); "
                     "multiclass one-vs-rest",
        "datasets": [], "runs": [], "best": {}, "io_baseline": {}, "rss_floor": {},
        "solvers_registered": streamsvm_solvers()}
    json_path = os.path.join(out, "results.json")
    t_suite = time.perf_counter()
    for name in cfg["datasets"]:
        spec = dataset_spec(name, cfg)
        t0 = time.perf_counter()
        ds = prepare_dataset(spec, cfg["work"], need_vw=_wants(cfg, "vw"))
        ds["prep_total_s"] = time.perf_counter() - t0
        if ds["ooc"]:
            from streamsvm._units import parse_size
            ds["budget_bytes"] = (parse_size(cfg["ooc_memory"], "--ooc-memory")
                                  if cfg.get("ooc_memory")
                                  else int(ds["decoded_bytes"] * OOC["budget_fraction"]))
            ds["budget"] = str(ds["budget_bytes"])
        res["datasets"].append(dict(ds))
        log(f"{name}: {ds['n_rows']:,} rows, {ds['n_features']:,} features, {ds['task']}, "
            f"decoded {ds['decoded_bytes'] / MB:,.0f} MB"
            + (f", budget {ds['budget_bytes'] / MB:,.0f} MB" if ds["ooc"] else ""))
        if ds["ooc"] or cfg.get("io_baseline_all"):
            log(f"{name}: I/O floor (read + decompress the store, median of 3)")
            res["io_baseline"][name] = io_baseline(ds["store"], repeat=3)
            rss = io_rss(ds["store"], os.path.join(out, "io-rss", name),
                         budget=ds.get("budget_bytes", 0))
            res["io_baseline"][name]["rss"] = rss
            res["rss_floor"][name] = rss.get("runtime_mb") or rss["import_mb"]
        evaluator = Evaluator(ds)
        losses = cfg["binary_losses"] if ds["task"] == "binary" else cfg["multiclass_losses"]
        if ds["ooc"] and cfg.get("ooc_losses"):
            losses = [l for l in losses if l in cfg["ooc_losses"]]
        if cfg.get("losses"):
            losses = [l for l in losses if l in cfg["losses"]]
        for C in cfg["Cs"]:
            for loss in losses:
                methods = _select(plan_methods(ds["task"], loss, ooc=ds["ooc"]), cfg["methods"])
                group = []
                for m in methods:
                    t0 = time.perf_counter()
                    run = run_method(m, ds, C, loss, cfg, evaluator)
                    group.append(run)
                    res["runs"].append(run)
                    log(f"{name} C={C:g} {loss}: {m['id']}: {run['status']}"
                        + (f" ({run['message'][:120]})" if run.get("message") else "")
                        + f" [{time.perf_counter() - t0:.1f}s]")
                res["best"].update(finalize_groups(group, cfg["target_gap"]))
                write_json(res, json_path)
        del evaluator
    res["best"] = finalize_groups(res["runs"], cfg["target_gap"])
    res["targets"] = dcd_targets(res)
    res["suite_seconds"] = time.perf_counter() - t_suite
    res["streamsvm_source_sha256_at_end"] = source_digest()
    if res["streamsvm_source_sha256_at_end"] != res["versions"]["streamsvm_source_sha256"]:
        log("WARNING: streamsvm's source changed during the run; rerun for clean numbers")
    res["machine"]["loadavg_at_end"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    validate_results(_clean(res))
    write_json(res, json_path)
    return res


def _wants(cfg: dict, method_id: str) -> bool:
    return not cfg["methods"] or any(p in method_id or p == method_id for p in cfg["methods"])


# =============================================================================================
# command line
# =============================================================================================

def _floats(s: str) -> list[float]:
    return [float(v) for v in s.split(",") if v.strip()]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="bench.py", formatter_class=argparse.RawDescriptionHelpFormatter,
        description=__doc__.split("\n\n")[0] + "\n\n" + "\n\n".join(__doc__.split("\n\n")[1:3]),
        epilog="Outputs: OUT/results.json (everything), OUT/results.md (tables), PNG plots in "
               "--plots. Data sets: " + ", ".join(REAL) + " (from ../shared/datasets) and "
               "synth-<rows>[-f<features>] (tools/make_synthetic.py, e.g. synth-1e6, or the "
               "text-like synth-1e6-f2e6: 2*10^6 features, default 10^5); data sets with at least "
               "the suite's out-of-core row count get a memory budget of 1/8 of the decoded "
               "store, and only streaming methods (streamsvm, SGD, VW) run on them.")
    p.add_argument("--suite", choices=sorted(SUITES), default="quick",
                   help="preset matrix (default quick: every real data set and synth-1e5, C=1, "
                        "all methods; < 10 min on 2 cores)")
    p.add_argument("--datasets", help="comma-separated data sets instead of the suite's")
    p.add_argument("--methods", help="comma-separated method ids or substrings (e.g. "
                                     "streamsvm,liblinear-s3,vw)")
    p.add_argument("-C", "--C", dest="Cs", type=_floats, help="comma-separated C values")
    p.add_argument("--losses", help="comma-separated losses (hinge,squared_hinge; ww: the "
                   "Weston–Watkins multiclass problem)")
    p.add_argument("--out", help="output directory (default bench-out/SUITE)")
    p.add_argument("--work", help="data directory: stores, text and VW copies, reused between "
                                  "runs (default bench-out/work)")
    p.add_argument("--plots", default=os.path.join(ROOT, "docs", "bench"),
                   help="directory for PNG plots (default docs/bench)")
    p.add_argument("--synthetic-nnz", type=int, default=SYNTH["nnz_per_row"],
                   help="mean non-zeros per synthetic row before de-duplication (default "
                        "%(default)s)")
    p.add_argument("--ooc-rows", type=float,
                   help="data sets with at least this many rows run out of core")
    p.add_argument("--repeat", type=int, help="fits per measurement when fast (median)")
    p.add_argument("--repeat-under", type=float,
                   help="repeat only fits faster than this many seconds")
    p.add_argument("--timeout", type=float, help="seconds per child process")
    p.add_argument("--max-passes", type=float, help="streamsvm max_passes")
    p.add_argument("--tol", type=float, help="streamsvm tol (relative duality gap); also the "
                   "gap to the best objective a LIBLINEAR -e must reach (default 1e-3)")
    p.add_argument("--memory", default="1GB",
                   help="streamsvm memory budget on in-memory data sets (default 1GB)")
    p.add_argument("--ooc-memory", default=None, metavar="SIZE",
                   help="streamsvm memory budget on out-of-core data sets (default: "
                        f"{OOC['budget_fraction']:g} of the store's decoded bytes)")
    p.add_argument("--readers", type=int, default=None,
                   help="streamsvm reader threads (default: the scheduler's, one fewer than "
                        "the CPUs for a local store)")
    p.add_argument("--seed", type=int, default=0, help="seed of every method (default 0)")
    p.add_argument("--no-cli", action="store_true",
                   help="skip the 'streamsvm train' CLI runs (whole-process time, peak RSS)")
    p.add_argument("--no-plots", action="store_true")
    p.add_argument("--io-baseline", nargs="?", const="__suite__", metavar="STORE",
                   help="with STORE: time reading + decompressing that store once and exit; "
                        "without: measure it for every data set of the suite")
    p.add_argument("--scheduler", metavar="STORE",
                   help="passes/s of alm and dcd (CoCoA+) on a dask LocalCluster of 1 and 2 "
                        "worker processes against the local backend (tools/_bench_dask.py); "
                        "--max-passes (default 8), --memory (per worker), --dask-solvers; "
                        "with --tol: the passes and seconds to that gap instead")
    p.add_argument("--dask-solvers", default="alm,dcd", metavar="LIST",
                   help="with --scheduler: the solvers to run, comma-separated (alm, dcd, "
                        "nesvm, ww; default alm,dcd)")
    p.add_argument("--dask-C", type=float, default=1.0, metavar="C",
                   help="with --scheduler: the cost C of every run (default 1)")
    p.add_argument("--memory-bound", metavar="STORE",
                   help="peak RSS of every solver's 'streamsvm train STORE --memory M' against "
                        "its runtime floor + M + its model (tools/_bench_memory.py): M is "
                        "--memory, the solvers --methods (default all), --max-passes caps "
                        "each run, --losses the loss (default hinge)")
    p.add_argument("--checks-cost", metavar="STORE",
                   help="time dcd's streamed sweeps over STORE with and without the store's "
                        "integrity checks, in alternation (--repeat rounds, default 6)")
    p.add_argument("--io-budget", metavar="SIZE",
                   help="with --io-baseline STORE: cache budget of the scheduler pass whose "
                        "peak RSS is reported (default 0)")
    p.add_argument("--render", metavar="RESULTS_JSON",
                   help="re-render tables and plots from a results file and exit")
    p.add_argument("--markdown-out", metavar="PATH",
                   help="with --render: write the Markdown here (plot links relative to it) "
                        "instead of next to the results file")
    p.add_argument("--clean", action="store_true",
                   help="delete the out-of-core data sets' files from --work at the end")
    p.add_argument("--prepare-only", action="store_true",
                   help="make the suite's stores and text files, then exit")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    return p


def make_config(args) -> dict:
    cfg = dict(SUITES[args.suite])
    cfg["suite"] = args.suite
    if args.datasets:
        cfg["datasets"] = [d.strip() for d in args.datasets.split(",") if d.strip()]
    if args.methods:
        cfg["methods"] = [m.strip() for m in args.methods.split(",") if m.strip()]
    if args.Cs:
        cfg["Cs"] = args.Cs
    cfg["losses"] = [l.strip() for l in args.losses.split(",")] if args.losses else None
    for k in ("repeat", "repeat_under", "timeout", "max_passes", "tol"):
        if getattr(args, k) is not None:
            cfg[k] = getattr(args, k)
    if args.ooc_rows is not None:
        cfg["ooc_rows"] = int(args.ooc_rows)
    cfg.update(seed=args.seed, memory=args.memory, ooc_memory=args.ooc_memory,
               readers=args.readers, cli=not args.no_cli,
               synthetic_nnz=args.synthetic_nnz,
               target_gap=TARGET_GAP if args.tol is None else args.tol,
               io_baseline_all=args.io_baseline == "__suite__", ooc=dict(OOC))
    cfg["out"] = os.path.abspath(args.out or os.path.join(ROOT, "bench-out", args.suite))
    cfg["work"] = os.path.abspath(args.work or os.path.join(ROOT, "bench-out", "work"))
    cfg["plots"] = os.path.abspath(args.plots)
    return cfg



def _save_side(r: dict, argv, out_dir: str, name: str) -> None:
    """A side measurement's result stamped with its command, machine and versions, written
    to ``out_dir/name``."""
    r.update(command="python tools/bench.py " + " ".join(shlex.quote(a) for a in argv),
             machine=machine_info(), versions=versions())
    os.makedirs(out_dir, exist_ok=True)
    write_json(r, os.path.join(out_dir, name))

def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    if args.worker:
        from tools._bench_methods import run_worker
        return run_worker(args.worker)
    from tools import _bench_report as report
    if args.render:
        with open(args.render) as f:
            res = json.load(f)
        out = os.path.dirname(os.path.abspath(args.render))
        md = report.render(res, out, None if args.no_plots else os.path.abspath(args.plots),
                           md_path=args.markdown_out)
        with open(md) as f:
            print(f.read())
        return 0
    if args.scheduler:
        from tools._bench_dask import DASK_SOLVERS, scaling_table, scheduler_scaling
        solvers = tuple(s.strip() for s in args.dask_solvers.split(",") if s.strip())
        bad = [s for s in solvers if s not in DASK_SOLVERS] or ([] if solvers else [""])
        if bad:
            build_parser().error(f"--dask-solvers: unknown solver {bad[0]!r} (choose from "
                                 f"{', '.join(DASK_SOLVERS)})")
        r = scheduler_scaling(args.scheduler, passes=int(args.max_passes or 8),
                              memory=args.memory, tol=args.tol, C=args.dask_C,
                              solvers=solvers)
        _save_side(r, argv, args.out or os.path.join(ROOT, "bench-out", "scheduler"),
                   "scheduler.json")
        print(scaling_table(r))
        return 0
    if args.memory_bound:
        from streamsvm.solvers import SOLVERS
        from tools._bench_memory import memory_bound, memory_table
        solvers = [n for n in sorted(SOLVERS) if not args.methods or any(
            m.strip() in n for m in args.methods.split(","))]
        out_dir = args.out or os.path.join(ROOT, "bench-out", "memory-bound")
        r = memory_bound(args.memory_bound, memory=args.memory, solvers=solvers,
                         out_dir=out_dir, run_child=run_child,
                         loss=(args.losses or "hinge").split(",")[0],
                         max_passes=args.max_passes)
        _save_side(r, argv, out_dir, "memory-bound.json")
        print(memory_table(r))
        return 0
    if args.checks_cost:
        r = checks_cost(args.checks_cost, rounds=args.repeat or 6)
        _save_side(r, argv, args.out or os.path.join(ROOT, "bench-out", "checks-cost"),
                   "checks-cost.json")
        print(checks_table(r))
        return 0
    if args.io_baseline and args.io_baseline != "__suite__":
        r = io_baseline(args.io_baseline, repeat=args.repeat or 3)
        budget = 0
        if args.io_budget:
            from streamsvm.schedule._memory import parse_memory
            budget = parse_memory(args.io_budget)
        out_dir = args.out or os.path.join(ROOT, "bench-out", "io-baseline")
        r["rss"] = io_rss(args.io_baseline, out_dir, budget=budget)
        _save_side(r, argv, out_dir, "io-baseline.json")
        print(json.dumps(_clean(r), indent=1))
        print(report.io_table({os.path.basename(args.io_baseline.rstrip('/')): r}))
        return 0
    cfg = make_config(args)
    if args.prepare_only:
        for name in cfg["datasets"]:
            ds = prepare_dataset(dataset_spec(name, cfg), cfg["work"], need_vw=_wants(cfg, "vw"))
            log(f"{name}: ready ({ds['n_rows']:,} rows, decoded {ds['decoded_bytes'] / MB:,.0f} "
                f"MB, on disk {ds['store_bytes_on_disk'] / MB:,.0f} MB) {ds['prep']}")
        return 0
    log(f"suite {cfg['suite']}: data sets {', '.join(cfg['datasets'])}; C {cfg['Cs']}; "
        f"output {cfg['out']}")
    res = run_suite(cfg, argv)
    report.render(res, cfg["out"], None if args.no_plots else cfg["plots"])
    with open(os.path.join(cfg["out"], "results.md")) as f:
        print(f.read())
    if args.clean:
        for d in res["datasets"]:
            if d.get("ooc"):
                shutil.rmtree(os.path.join(cfg["work"], d["name"]), ignore_errors=True)
                log(f"removed {os.path.join(cfg['work'], d['name'])}")
    log(f"done in {res['suite_seconds']:.0f} s: {os.path.join(cfg['out'], 'results.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
